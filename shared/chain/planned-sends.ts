import type { DataSource, EntityManager } from 'typeorm';
import type { Chain, Environment } from '../domain/chains.js';
import { plannedFromLegacy, type LegacySendPayload, type RecordedSend } from '../kernel/chain-send.js';

// A hot-wallet send is recorded (`planned`) by the unit that decides it, before any job exists: its destination,
// amount and what it pays for live in chain_sends, and the chain.send job names only its reference. The sender signs
// exactly that row (sender.ts refuses to sign anything else under its reference).

type Queryable = Pick<DataSource | EntityManager, 'query'>;

export interface PlannedSendInput {
  environment: Environment;
  chain: Chain;
  reference: string;
  purpose: 'onramp_delivery' | 'refund' | 'withdrawal';
  /** The treasury hot wallet's address (it signs every send a chain.send job makes). */
  from: string;
  to: string;
  amount: bigint;
  transactionId?: string;
  withdrawalId?: string;
  refundTotal?: bigint;
}

/** Records the decided send in the deciding unit; a reference already recorded keeps its first decision. */
export async function planSend(em: Queryable, p: PlannedSendInput): Promise<void> {
  await em.query(
    `INSERT INTO chain_sends (environment, chain, reference, purpose, from_address, to_address, hd_index, asset, amount, status, transaction_id, withdrawal_id, refund_total)
     VALUES ($1, $2, $3, $4, $5, $6, NULL, 'USDC', $7, 'planned', $8, $9, $10)
     ON CONFLICT (environment, chain, reference) DO NOTHING`,
    [p.environment, p.chain, p.reference, p.purpose, p.from.toLowerCase(), p.to.toLowerCase(), p.amount.toString(), p.transactionId ?? null, p.withdrawalId ?? null,
      p.refundTotal?.toString() ?? null],
  );
}

/** The send recorded under a reference, planned or signed, as a chain.send job decides on it. */
export async function recordedSend(q: Queryable, environment: Environment, chain: Chain, reference: string): Promise<(RecordedSend & { from_address: string }) | undefined> {
  const rows: (RecordedSend & { from_address: string })[] = await q.query(
    `SELECT purpose, status, from_address, to_address, amount::text, asset, hd_index, transaction_id::text, withdrawal_id::text, refund_total::text
       FROM chain_sends WHERE environment = $1 AND chain = $2 AND reference = $3`,
    [environment, chain, reference],
  );
  return rows[0];
}

/**
 * A job staged before sends were planned names a reference with no row: the outbox row its deciding unit wrote (in
 * PostgreSQL, never the job's own data) is recorded as the planned send. No such row: nothing (null).
 */
export async function planFromOutbox(ds: DataSource, environment: Environment, chain: Chain, reference: string, hotWallet: string): Promise<boolean> {
  const rows: { payload: LegacySendPayload }[] = await ds.query(
    `SELECT payload FROM outbox_jobs WHERE job_name = 'chain.send' AND environment = $1 AND payload->>'chain' = $2 AND payload->>'reference' = $3 ORDER BY id LIMIT 1`,
    [environment, chain, reference],
  );
  const legacy = plannedFromLegacy(reference, rows[0]?.payload);
  if (!legacy) return false;
  await planSend(ds, {
    environment, chain, reference, purpose: legacy.purpose as PlannedSendInput['purpose'], from: hotWallet, to: legacy.to_address, amount: BigInt(legacy.amount),
    transactionId: legacy.transaction_id ?? undefined, withdrawalId: legacy.withdrawal_id ?? undefined, refundTotal: legacy.refund_total ? BigInt(legacy.refund_total) : undefined,
  });
  return true;
}
