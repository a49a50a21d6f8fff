import { parseEventLogs, type Address, type Hex, type PublicClient } from 'viem';
import type { EntityManager } from 'typeorm';
import type { Config } from '../config.js';
import type { JobRequest } from '../queues/producer.js';
import { jobId } from '../queues/registry.js';
import { inUnit, type Unit, type UnitDeps } from '../db/unit-of-work.js';
import { chainFor } from './sandbox-chain.js';
import { TRANSFER_EVENT } from './usdc.js';
import { rewindCursor } from './cursor.js';
import type { Chain, Environment } from '../domain/chains.js';
import { fromMinor, USDC_SCALE } from '../domain/money.js';
import { observeTransfer } from '../domain/offramps.js';
import { loadSettlement } from '../domain/settlements.js';
import { recordPayment } from '../domain/treasury-deposits.js';
import { receiveLiquidationTransfer } from '../domain/liquidation-transfers.js';
import { CHAIN_INFLOW_MACHINE, type ChainInflowStatus } from '../domain/machines.js';
import { moveRecord } from '../domain/transition.js';

// The core of the live settlement watcher: one pass over a chain for one environment.
//
// - The cursor (`chain_cursors`, per environment and chain) is the next block to scan. With no row yet, the first scan
//   starts at SETTLEMENT_START_BLOCK_<CHAIN>, else at the head recorded when the oldest open deposit address of the
//   chain was issued (`issued_block`), so a transfer made before the watcher first ran is still seen; the head only
//   when no open address has one (the sandbox's, which no watcher scans in production).
// - It asks for every ERC-20 Transfer log of the token over [cursor, min(head, cursor + maxRange - 1)], with no
//   `to` filter: one request whatever the number of open deposit addresses. A range the RPC refuses is halved, down
//   to one block, and the rest of the range is then asked for in pieces of the width that worked.
// - The distinct recipients are matched in one query against every open deposit address of the environment and
//   chain: settlements awaiting a transfer (or closed, so that a late deposit is still recorded) and every payment
//   intent's deposit address (late payments are recorded and flagged by recordPayment), and every liquidation address,
//   archived ones included (a transfer to one is returned to its sender). A settlement of a liquidation transfer is
//   never matched itself: its address is the liquidation address, and each transfer to it is one off-ramp.
// - Each matching log is applied in its own unit of work, in chain order. Applying is idempotent by
//   (transaction hash, log index), so a range scanned twice (a crash before the cursor moved, two scanners) counts
//   every transfer once. A log that fails to apply fails the scan before the cursor moves: the next scan retries it.
// - Then the cursor moves to `to + 1`, unless another scanner moved it meanwhile (compare-and-set).

export { TRANSFER_EVENT };

/**
 * Settlement statuses whose deposit address still records transfers: every one (expired and underpaid ones as late
 * deposits, a confirmed one as an overpayment), so no USDC sent to an address of ours goes unrecorded.
 */
export const WATCHED_SETTLEMENT_STATUSES = ['awaiting_transfer', 'confirming', 'confirmed', 'underpaid', 'expired'] as const;

/** Settlement statuses still open (waiting on transfers or their depth): a chain with one is scanned. */
export const OPEN_SETTLEMENT_STATUSES: string[] = WATCHED_SETTLEMENT_STATUSES.filter((s) => s !== 'confirmed' && s !== 'expired');

export interface ScanInput {
  environment: Environment;
  chain: Chain;
  client: PublicClient;
  /** The token contract whose Transfer logs are read (the chain's USDC). */
  token: Address;
  /** The widest block range asked for in one scan (SETTLEMENT_MAX_BLOCK_RANGE). */
  maxRange: bigint;
}

export interface ScanResult {
  /** The first block scanned. */
  from: bigint;
  /** The last block scanned (from - 1 when there was nothing to scan yet). */
  to: bigint;
  /** Transfer logs of the token in the range. */
  logs: number;
  /** Of those, the logs to an open deposit address (applied; a rescan matches them again and changes nothing). */
  matched: number;
  /** The chain's head when the scan began: head - to is how far the watcher is behind. */
  head: bigint;
}

export interface TransferLog {
  from: string;
  to: string;
  value: bigint;
  transactionHash: Hex;
  logIndex: number;
  blockNumber: bigint;
  blockHash: Hex;
}

interface Match {
  /** A deposit address (a settlement's, a payment intent's), or live custody: a managed wallet, the treasury hot wallet. */
  kind: 'settlement' | 'payment_intent' | 'liquidation_address' | 'wallet' | 'treasury';
  id: string;
  address: string;
}

/** The cursor: the next block to scan, or null before the first scan. */
export async function readCursor(deps: Pick<UnitDeps, 'ds'>, environment: Environment, chain: Chain): Promise<bigint | null> {
  const rows: { next_block: string }[] = await deps.ds.query(`SELECT next_block::text FROM chain_cursors WHERE environment = $1 AND chain = $2`, [environment, chain]);
  return rows[0] ? BigInt(rows[0].next_block) : null;
}

/**
 * Moves the cursor to `next` if it still stands at `expected` (null: no row yet). Answers whether it moved: false when
 * another scanner got there first (its scan covered the same blocks; applying is idempotent, so nothing is lost).
 */
export async function advanceCursor(deps: Pick<UnitDeps, 'ds'>, environment: Environment, chain: Chain, expected: bigint | null, next: bigint): Promise<boolean> {
  const rows: unknown[] = await deps.ds.query(
    `INSERT INTO chain_cursors AS c (environment, chain, next_block, updated_at) VALUES ($1, $2, $3, now())
     ON CONFLICT (environment, chain) DO UPDATE SET next_block = EXCLUDED.next_block, updated_at = now()
      WHERE c.next_block IS NOT DISTINCT FROM $4::bigint
     RETURNING 1`,
    [environment, chain, next.toString(), expected === null ? null : expected.toString()],
  );
  return rows.length > 0;
}

export { rewindCursor };

/** Whether an eth_getLogs error is the RPC refusing the range (as opposed to the RPC being down). */
export function isRangeRefusal(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const { message, details, code } = e as { message?: unknown; details?: unknown; code?: unknown };
    if (code === -32005) return true; // EIP-1474 limit exceeded
    if ([message, details].some((m) => typeof m === 'string' && /range|limit|too many|exceed/i.test(m))) return true;
  }
  return false;
}

/**
 * Every Transfer log of the token in [from, to], asking for at most `width` blocks at a time and halving the width
 * whenever the RPC refuses (a refusal, or any error while more than one block is asked for). A single block that
 * still fails throws.
 */
export async function fetchTransferLogs(
  client: PublicClient,
  token: Address,
  from: bigint,
  to: bigint,
  onHalve?: (info: { from: bigint; to: bigint; width: bigint; err: unknown }) => void,
): Promise<TransferLog[]> {
  const out: TransferLog[] = [];
  let width = to - from + 1n;
  let pos = from;
  while (pos <= to) {
    const end = pos + width - 1n < to ? pos + width - 1n : to;
    let logs;
    try {
      logs = await client.getLogs({ address: token, event: TRANSFER_EVENT, fromBlock: pos, toBlock: end, strict: true });
    } catch (err) {
      const asked = end - pos + 1n;
      // A refusal (isRangeRefusal) or any other error while more than one block was asked for: ask for half. One block
      // that still fails is the RPC failing, whatever it says.
      if (asked <= 1n) throw err;
      width = (asked + 1n) / 2n; // ceil(asked / 2): at least one block less each time, down to 1
      onHalve?.({ from: pos, to: end, width, err });
      continue;
    }
    for (const log of logs) {
      // Pending logs carry no block: eth_getLogs over mined blocks never answers one.
      if (log.blockNumber === null || log.transactionHash === null || log.logIndex === null || log.blockHash === null) continue;
      out.push({ from: log.args.from, to: log.args.to, value: log.args.value, transactionHash: log.transactionHash, logIndex: log.logIndex, blockNumber: log.blockNumber, blockHash: log.blockHash });
    }
    pos = end + 1n;
  }
  return out;
}

/**
 * The addresses of ours among `addresses` (lowercase), in one query: open deposit addresses of the environment and
 * chain, and where the chain is live, the managed wallets and the treasury hot wallet (their funding from outside is
 * recorded, so the ledger keeps up with the chain).
 */
export async function matchDepositAddresses(deps: Pick<UnitDeps, 'ds'> & { config?: Config }, environment: Environment, chain: Chain, addresses: string[]): Promise<Match[]> {
  if (!addresses.length) return [];
  const custody = Boolean(deps.config && chainFor(environment, deps.config).live);
  const hot = custody ? deps.config!.wallets[environment]!.treasuryAddress.toLowerCase() : null;
  const matches: Match[] = await deps.ds.query(
    `SELECT 'settlement' AS kind, s.id, lower(s.to_address) AS address FROM settlements s
      WHERE s.environment = $1 AND s.chain = $2 AND s.status = ANY($3::text[]) AND lower(s.to_address) = ANY($4::text[]) AND s.liquidation_address_id IS NULL
     UNION ALL
     SELECT 'liquidation_address' AS kind, l.id, lower(l.address) AS address FROM liquidation_addresses l
      WHERE l.environment = $1 AND l.chain = $2 AND lower(l.address) = ANY($4::text[])
     UNION ALL
     SELECT 'payment_intent' AS kind, i.id, lower(i.deposit_address) AS address FROM payment_intents i
      WHERE i.environment = $1 AND i.chain = $2 AND lower(i.deposit_address) = ANY($4::text[])
     UNION ALL
     SELECT 'wallet' AS kind, w.id, lower(w.address) AS address FROM wallets w
      WHERE $5 AND w.environment = $1 AND w.type = 'managed_wallet' AND lower(w.address) = ANY($4::text[])`,
    [environment, chain, [...WATCHED_SETTLEMENT_STATUSES], addresses, custody],
  );
  return hot && addresses.includes(hot) ? [...matches, { kind: 'treasury', id: hot, address: hot }] : matches;
}

/** One pass of the watcher over a chain for an environment: see the notes at the top of this file. */
export async function scanChain(deps: UnitDeps & { config: Config }, input: ScanInput): Promise<ScanResult> {
  const { environment, chain, client, token } = input;
  if (input.maxRange < 1n) throw new RangeError('maxRange must be at least 1');
  const cursor = await readCursor(deps, environment, chain);
  const head = await client.getBlockNumber({ cacheTime: 0 });
  const from = cursor ?? deps.config.chains[chain].startBlock ?? (await oldestIssuedBlock(deps, environment, chain)) ?? head;
  if (from > head) {
    // Nothing new since the last scan (or a node behind the one that served it): wait for the chain.
    if (cursor === null) await advanceCursor(deps, environment, chain, null, from);
    return { from, to: from - 1n, logs: 0, matched: 0, head };
  }
  const to = from + input.maxRange - 1n < head ? from + input.maxRange - 1n : head;
  const logs = await fetchTransferLogs(client, token, from, to, ({ from: f, to: t, width, err }) =>
    deps.log.warn({ chain, environment, from: f.toString(), to: t.toString(), width: width.toString(), refusal: isRangeRefusal(err), err: (err as Error).message?.slice(0, 300) }, 'eth_getLogs range refused; halving'),
  );

  const recipients = [...new Set(logs.map((l) => l.to.toLowerCase()))];
  const matches = await matchDepositAddresses(deps, environment, chain, recipients);
  const byAddress = new Map(matches.map((m) => [m.address, m]));
  const matching = logs
    .filter((l) => byAddress.has(l.to.toLowerCase()))
    .sort((a, b) => (a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1));

  for (const log of matching) {
    const match = byAddress.get(log.to.toLowerCase())!;
    await applyTransfer(deps, match, log, environment, chain);
  }

  // The node that answered eth_getLogs may be behind the one that gave the head (a load-balanced RPC): its answer can
  // lack the newest blocks' logs. The cursor trails by SETTLEMENT_RESCAN_BLOCKS, so they are read again next time
  // (a transfer seen twice is one transfer); it never moves back.
  const trailing = to + 1n - BigInt(deps.config.settlementRescanBlocks);
  if (!(await advanceCursor(deps, environment, chain, cursor, trailing > from ? trailing : from))) {
    deps.log.info({ chain, environment, to: to.toString() }, 'chain cursor moved by another scanner meanwhile; left as it is');
  }
  if (matching.length) deps.log.info({ chain, environment, from: from.toString(), to: to.toString(), logs: logs.length, matched: matching.length }, 'chain scanned');
  return { from, to, logs: logs.length, matched: matching.length, head };
}

/** The head when the oldest deposit address of the chain still open was issued (null: none recorded). */
async function oldestIssuedBlock(deps: Pick<UnitDeps, 'ds'>, environment: Environment, chain: Chain): Promise<bigint | null> {
  const [{ block }]: { block: string | null }[] = await deps.ds.query(
    `SELECT least((SELECT min(issued_block) FROM settlements WHERE environment = $1 AND chain = $2 AND status = ANY($3::text[])),
                  (SELECT min(issued_block) FROM payment_intents WHERE environment = $1 AND chain = $2 AND status IN ('awaiting_payment', 'processing')),
                  (SELECT min(issued_block) FROM liquidation_addresses WHERE environment = $1 AND chain = $2 AND status = 'active'))::text AS block`,
    [environment, chain, OPEN_SETTLEMENT_STATUSES],
  );
  return block === null ? null : BigInt(block);
}

/** The receipt job of a hash a business named (one per hash: naming it again is the same job). */
export const receiptJob = (environment: Environment, chain: Chain, transactionHash: string): JobRequest<'chain.receipt'> => ({
  name: 'chain.receipt', id: jobId('chain.receipt', environment, chain, transactionHash), data: { environment, chain, transactionHash },
});

/**
 * The business's hint (POST /transactions/{id}/confirm): the receipt of the transaction it names is read directly, and
 * its token transfers to our deposit addresses are recorded, as a scan would record them later. A hash of another
 * token, another chain or a failed transaction matches nothing and changes nothing; one not mined yet throws (the job
 * retries).
 */
export async function applyReceipt(deps: UnitDeps & { config: Config }, input: Omit<ScanInput, 'maxRange'> & { transactionHash: Hex }): Promise<number> {
  const receipt = await input.client.getTransactionReceipt({ hash: input.transactionHash });
  if (receipt.status !== 'success') return 0;
  const logs: TransferLog[] = parseEventLogs({ abi: [TRANSFER_EVENT], logs: receipt.logs, strict: true })
    .filter((l) => l.address.toLowerCase() === input.token.toLowerCase())
    .map((l) => ({ from: l.args.from, to: l.args.to, value: l.args.value, transactionHash: l.transactionHash!, logIndex: l.logIndex!, blockNumber: l.blockNumber!, blockHash: l.blockHash! }));
  const matches = new Map((await matchDepositAddresses(deps, input.environment, input.chain, [...new Set(logs.map((l) => l.to.toLowerCase()))])).map((m) => [m.address, m]));
  const matching = logs.filter((l) => matches.has(l.to.toLowerCase()));
  for (const log of matching) await applyTransfer(deps, matches.get(log.to.toLowerCase())!, log, input.environment, input.chain);
  return matching.length;
}

/** Records one matching log, in its own unit of work (idempotent by transaction hash and log index). */
async function applyTransfer(deps: UnitDeps & { config: Config }, match: Match, log: TransferLog, environment: Environment, chain: Chain): Promise<void> {
  if (match.kind === 'wallet' || match.kind === 'treasury') {
    await inUnit(deps, (unit) => recordInflow(unit, environment, chain, match, log));
    return;
  }
  if (match.kind === 'liquidation_address') {
    await inUnit(deps, (unit) => receiveLiquidationTransfer(unit, deps.config, match.id, {
      transactionHash: log.transactionHash, logIndex: log.logIndex, amount: log.value, blockNumber: log.blockNumber, blockHash: log.blockHash, from: log.from,
    }));
    return;
  }
  if (match.kind === 'settlement') {
    await inUnit(deps, async (unit) => {
      const settlement = await loadSettlement(unit.em, match.id);
      if (!settlement) return;
      await observeTransfer(unit, deps.config, settlement, {
        transactionHash: log.transactionHash, logIndex: log.logIndex, amount: log.value, blockNumber: log.blockNumber, blockHash: log.blockHash, from: log.from,
      });
    });
    return;
  }
  await inUnit(deps, (unit) =>
    recordPayment(unit, deps.config, match.id, {
      method: 'stablecoin',
      key: `${log.transactionHash}-${log.logIndex}`,
      currency: 'USDC',
      amount: fromMinor(log.value, USDC_SCALE),
      usdcAmount: log.value,
      reference: log.transactionHash,
      transactionHash: log.transactionHash,
      blockNumber: log.blockNumber,
      blockHash: log.blockHash,
    }),
  );
}

/**
 * USDC that reached a managed wallet or the hot wallet from outside: recorded once (by hash and log index) as
 * `pending`, with its block; confirmInflows (wallet-inflows.ts) credits a managed wallet once it is deep enough. One a
 * reorg took (`reorged`) and that is mined again is pending again, in its new block. Our own sends (deliveries,
 * refunds, sweeps) are already in the books.
 */
async function recordInflow(unit: Unit, environment: Environment, chain: Chain, match: Match, log: TransferLog): Promise<void> {
  const ours: unknown[] = await unit.em.query(
    `SELECT 1 FROM chain_sends WHERE environment = $1 AND chain = $2 AND (transaction_hash = $3 OR $3 = ANY(replaced_hashes)) LIMIT 1`,
    [environment, chain, log.transactionHash],
  );
  if (ours.length) return;
  const recorded: unknown[] = await unit.em.query(
    `INSERT INTO chain_inflows (environment, chain, address, kind, wallet_id, transaction_hash, log_index, amount, block_number, block_hash, from_address)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
     ON CONFLICT (environment, chain, transaction_hash, log_index) DO NOTHING RETURNING id`,
    [environment, chain, match.address, match.kind === 'wallet' ? 'managed_wallet' : 'treasury', match.kind === 'wallet' ? match.id : null, log.transactionHash, log.logIndex,
      log.value.toString(), log.blockNumber.toString(), log.blockHash, log.from.toLowerCase()],
  );
  if (recorded.length) return;
  // Seen before: one a reorg took is pending again in its new block (a compare-and-set from reorged); any other stays.
  const [seen]: { id: string; status: ChainInflowStatus }[] = await unit.em.query(
    `SELECT id, status FROM chain_inflows WHERE environment = $1 AND chain = $2 AND transaction_hash = $3 AND log_index = $4`,
    [environment, chain, log.transactionHash, log.logIndex],
  );
  if (seen?.status === 'reorged') {
    await moveRecord(unit.em, CHAIN_INFLOW_MACHINE, { id: seen.id, expected: 'reorged', to: 'pending', set: { block_number: log.blockNumber.toString(), block_hash: log.blockHash } });
  }
}
