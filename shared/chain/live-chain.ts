import { getAddress } from 'viem';
import type { Config } from '../config.js';
import type { Unit } from '../db/unit-of-work.js';
import type { EventScope } from '../domain/events.js';
import type { Chain, Environment } from '../domain/chains.js';
import type { JobRequest } from '../queues/producer.js';
import { jobId } from '../queues/registry.js';
import type { ChainAdapter, ConfirmationSubject } from './adapter.js';
import { absentAsNull, ChainUnavailableError, publicClientFor, scanClientFor, unknownChainAnswer } from './clients.js';
import { sendAndSettle, transferLogOf } from './sender.js';
import { planSend } from './planned-sends.js';

/**
 * The live chain: USDC on each chain's RPC. A managed wallet's transfer is signed, sent once and waited for (in the
 * settlement pool's job, outside any unit of work); deliveries and refunds leave the treasury hot wallet through the
 * `chain.send` job, staged in the unit that decided them; confirmations count from the chain head, and a transfer's
 * block is checked to still be canonical. A read that fails is ChainUnavailableError ("unknown", checked again later),
 * never an answer.
 */
export function liveChain(config: Config): ChainAdapter {
  return {
    live: true,
    async sendFromManagedWallet(deps, scope: EventScope, req) {
      const sent = (await sendAndSettle({ ...deps, config }, {
        environment: scope.environment, chain: req.chain, reference: `offramp-${req.reference}`, purpose: 'offramp_funding',
        signer: { kind: 'managed', index: req.hdIndex }, to: req.to, asset: 'USDC', amount: req.amount,
      }))!;
      const log = transferLogOf(sent.receipt, config.chains[req.chain].usdcAddress, req.to);
      if (!log) throw new Error(`the mined transfer ${sent.row.transaction_hash} carries no USDC Transfer to the deposit address`);
      return { hash: sent.row.transaction_hash, nonce: Number(sent.row.nonce), logIndex: log.logIndex, blockNumber: log.blockNumber, blockHash: log.blockHash };
    },
    async deliver(unit: Unit, scope: EventScope, req) {
      await stageSend(unit, config, scope, { purpose: 'onramp_delivery', reference: `onramp-${req.reference}`, chain: req.chain, to: req.to, amount: req.amount, transactionId: req.transactionId });
      return null;
    },
    async refund(unit: Unit, scope: EventScope, req) {
      await stageSend(unit, config, scope, {
        purpose: 'refund', reference: `refund-${req.reference}`, chain: req.chain, to: req.to, amount: req.amount, transactionId: req.transactionId, total: req.total,
      });
      return null;
    },
    async withdraw(unit: Unit, scope: EventScope, req) {
      await stageSend(unit, config, scope, { purpose: 'withdrawal', reference: `withdrawal-${req.reference}`, chain: req.chain, to: req.to, amount: req.amount, withdrawalId: req.withdrawalId });
      return null;
    },
    async confirmations(subject: ConfirmationSubject) {
      if (subject.block_number === null) return 0;
      const head = await scanClientFor(config, subject.chain).getBlockNumber({ cacheTime: 0 }).catch((err: unknown) => { throw unknownChainAnswer(subject.chain, err); });
      const depth = head - BigInt(subject.block_number) + 1n;
      return depth < 0n ? 0 : Number(depth > BigInt(subject.required_confirmations) ? BigInt(subject.required_confirmations) : depth);
    },
    async canonical(chain: Chain, blockNumber: bigint, blockHash: string) {
      const block = await absentAsNull(chain, scanClientFor(config, chain).getBlock({ blockNumber }));
      // A block the node does not serve is past its head: a lagging node, or a chain that got shorter and will grow
      // again. Either way nothing is known yet; a reorg is only ever a different block at that height.
      if (!block) throw new ChainUnavailableError(chain, `block ${blockNumber} is not served by the node (past its head)`);
      return block.hash === blockHash;
    },
    async head(chain: Chain) {
      return publicClientFor(config, chain).getBlockNumber({ cacheTime: 0 }).catch((err: unknown) => { throw unknownChainAnswer(chain, err); });
    },
  };
}

type StagedSend = { reference: string; chain: Chain; to: string; amount: bigint } & (
  | { purpose: 'onramp_delivery'; transactionId: string }
  | { purpose: 'refund'; transactionId: string; total: bigint }
  | { purpose: 'withdrawal'; withdrawalId: string }
);

/** The hot wallet's send, recorded (planned) with the unit that decided it; its job names only the reference and what it pays for. */
function sendJob(environment: Environment, s: StagedSend): JobRequest<'chain.send'> {
  const subject = s.purpose === 'withdrawal' ? { purpose: s.purpose, withdrawalId: s.withdrawalId } : { purpose: s.purpose, transactionId: s.transactionId };
  return { name: 'chain.send', id: jobId('chain.send', environment, s.chain, s.reference), data: { environment, chain: s.chain, reference: s.reference, ...subject } };
}

async function stageSend(unit: Unit, config: Config, scope: EventScope, s: StagedSend): Promise<void> {
  const hot = config.wallets[scope.environment]?.treasuryAddress;
  if (!hot) throw new Error(`no treasury hot wallet address for ${scope.environment}`);
  await planSend(unit.em, {
    environment: scope.environment, chain: s.chain, reference: s.reference, purpose: s.purpose, from: hot, to: getAddress(s.to), amount: s.amount,
    ...(s.purpose === 'withdrawal' ? { withdrawalId: s.withdrawalId } : { transactionId: s.transactionId }),
    ...(s.purpose === 'refund' ? { refundTotal: s.total } : {}),
  });
  await unit.stage(sendJob(scope.environment, s), scope);
}
