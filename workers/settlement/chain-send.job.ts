import { inUnit, type Unit } from '../../shared/db/unit-of-work.js';
import { findSend, sendAndSettle } from '../../shared/chain/sender.js';
import { planFromOutbox, recordedSend } from '../../shared/chain/planned-sends.js';
import { decideChainSend, type SendSubject } from '../../shared/kernel/chain-send.js';
import { completeDelivery } from '../../shared/domain/fiat-steps.js';
import { completeRefund } from '../../shared/domain/offramps.js';
import { refundSendFailed, refundSendPending } from '../../shared/domain/refunds.js';
import { settlementOf } from '../../shared/domain/settlements.js';
import { refundSendFate } from '../../shared/kernel/refund-due.js';
import { sweepDepositAddress } from './sweep-settlement.job.js';
import { loadTransaction, lockTransaction } from '../../shared/domain/transactions.js';
import { stepFailed } from '../../shared/domain/transaction-moves.js';
import { failDelivery } from '../../shared/domain/onramp-refunds.js';
import { withdrawalReverted, withdrawalSent } from '../../shared/domain/treasury-withdrawals.js';
import type { JobPayloads } from '../../shared/queues/registry.js';
import type { WorkerDeps } from '../job-definition.js';
import { defineJob } from '../job-definition.js';

/**
 * Live: the treasury hot wallet sends USDC (an on-ramp's delivery, a refund, a treasury withdrawal) and its subject
 * records it once mined. The job names a send recorded (planned) by the unit that decided it; destination, amount and
 * subject come from that row, never from the job's data, so a job added or edited by anyone else sends nothing the
 * database does not say. The send is signed and recorded before it is broadcast, so a retry or a restarted worker
 * checks the chain and never sends twice; while it is not mined the job retries with backoff.
 */
async function refundFailed(unit: Unit, transactionId: string, reference: string): Promise<string> {
  const tx = await lockTransaction(unit, transactionId);
  return tx ? refundSendFailed(unit, tx, reference) : 'gone';
}

export const chainSendJob = defineJob({
  name: 'chain.send',
  async process(job, deps) {
    const d = job.data;
    const decision = decideChainSend(await recordedOrLegacy(deps, d));
    if (decision.kind === 'nothing') {
      deps.log.warn({ job_id: job.id, reference: d.reference, chain: d.chain, environment: d.environment, reason: decision.reason }, 'a chain.send job names no send the database records: nothing sent');
      return `nothing sent: ${decision.reason}`;
    }
    const subject = decision.subject;
    if (subject.purpose === 'refund') {
      // Only the refund's send in flight is made: one it gave up on (failed, due again under a new reference) never is.
      const tx = await loadTransaction(deps.ds, subject.transactionId);
      if (!tx || !refundSendPending(tx, d.reference)) return `refund send not pending (${tx?.refund_status ?? 'gone'})`;
      // The USDC being returned sits at the deposit address: swept to the hot wallet first, so the hot wallet's own USDC is never spent.
      const settlement = (await settlementOf(deps.ds, tx.id))!;
      await sweepDepositAddress(deps, { environment: d.environment, chain: d.chain, address: settlement.to_address, hdIndex: settlement.hd_index, reference: `sweep-${settlement.id}-${d.reference}` });
    }
    let sent;
    try {
      sent = await sendAndSettle(deps, {
        environment: d.environment, chain: d.chain, reference: d.reference, purpose: subject.purpose, signer: decision.signer, to: decision.to, asset: decision.asset, amount: decision.amount,
      });
    } catch (err) {
      // A reverted withdrawal moved nothing (the chain says so): it fails and its amount returns to the treasury.
      const reverted = (await findSend(deps.ds, d.environment, d.chain, d.reference))?.status === 'reverted';
      if (reverted && subject.purpose === 'withdrawal') return inUnit(deps, (unit) => withdrawalReverted(unit, subject.withdrawalId, (err as Error).message));
      // A delivery the chain refused (the token contract reverted it: a frozen address, say) will never arrive: the
      // on-ramp fails and the payer's fiat goes back to them.
      if (reverted && subject.purpose === 'onramp_delivery') {
        return inUnit(deps, async (unit) => {
          const tx = await lockTransaction(unit, subject.transactionId);
          const failed = tx && (await failDelivery(unit, tx, { code: 'delivery_failed', message: `The USDC delivery was reverted on chain: ${(err as Error).message}` }));
          return failed ? 'delivery failed; fiat refund pending' : `unchanged (${tx?.status ?? 'gone'})`;
        });
      }
      // A refund the chain refused (its destination blacklisted by the token, say): nothing left; its amount is due again.
      if (reverted && subject.purpose === 'refund') return inUnit(deps, async (unit) => (await refundFailed(unit, subject.transactionId, d.reference)));
      throw err;
    }
    const hash = sent!.receipt.transactionHash;
    if (subject.purpose === 'withdrawal') return inUnit(deps, (unit) => withdrawalSent(unit, subject.withdrawalId, hash));
    return inUnit(deps, async (unit) => {
      const tx = (await loadTransaction(unit.em, subject.transactionId))!;
      if (subject.purpose === 'onramp_delivery') return completeDelivery(unit, tx, hash);
      const locked = (await lockTransaction(unit, subject.transactionId))!;
      return completeRefund(unit, locked, { reference: d.reference, amount: decision.amount, hash });
    });
  },
  async onFinalFailure(job, err, deps) {
    const d = job.data;
    const message = (err as Error).message;
    const decision = decideChainSend(await recordedSend(deps.ds, d.environment, d.chain, d.reference));
    if (decision.kind === 'nothing') return;
    const subject: SendSubject = decision.subject;
    const named = subject.purpose === 'withdrawal' ? { withdrawal_id: subject.withdrawalId } : { transaction_id: subject.transactionId };
    deps.log.error({ ...named, reference: d.reference, chain: d.chain, err: message }, 'the treasury hot wallet could not send; an operator must act');
    // A withdrawal stays pending: the sweeper stages its send again (same reference, never sent twice).
    if (subject.purpose === 'withdrawal') return;
    await inUnit(deps, async (unit) => {
      const tx = await loadTransaction(unit.em, subject.transactionId);
      if (!tx) return;
      if (subject.purpose === 'onramp_delivery') {
        if (tx.status === 'processing') await stepFailed(unit, tx, 'funded', message);
        return;
      }
      // A refund whose send was signed may still be mined: it stays pending (the sweeper stages this job again).
      const record = (await findSend(unit.em, d.environment, d.chain, d.reference))?.status ?? 'none';
      if (refundSendFate(record) === 'failed') await refundFailed(unit, subject.transactionId, d.reference);
    });
  },
});

/** The send recorded under the job's reference; for a job staged before sends were planned, the one its outbox row records. */
async function recordedOrLegacy(deps: WorkerDeps, d: JobPayloads['chain.send']) {
  const found = await recordedSend(deps.ds, d.environment, d.chain, d.reference);
  if (found) return found;
  const hot = deps.config.wallets[d.environment]?.treasuryAddress;
  if (!hot || !(await planFromOutbox(deps.ds, d.environment, d.chain, d.reference, hot))) return undefined;
  deps.log.info({ reference: d.reference, chain: d.chain }, 'a chain.send job from before sends were planned: its send recorded from the outbox row that staged it');
  return recordedSend(deps.ds, d.environment, d.chain, d.reference);
}
