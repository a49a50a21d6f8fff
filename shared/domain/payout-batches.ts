import type { DataSource, EntityManager } from 'typeorm';
import type { Config } from '../config.js';
import type { Unit } from '../db/unit-of-work.js';
import { findScoped } from '../db/pagination.js';
import type { EventScope } from './events.js';
import { PAYOUT_BATCH_MACHINE, type PayoutBatchStatus } from './machines.js';
import { formatAmount, USDC_SCALE } from './money.js';
import { rampCorridor } from './quotes.js';
import { scopeOf, type TransactionRow } from './transactions.js';
import { NOW, transition } from './transition.js';

// Payout batches (CONTRACT section 16): one request pays up to 500 beneficiaries from the treasury. The whole batch is
// validated and priced before anything is written (any bad item: 422 invalid_batch naming each by its index); then,
// in one unit, each item becomes a treasury-funded off-ramp (funded at once, its payout job staged) and the treasury is
// debited once for the batch's total (409 insufficient_funds when short: nothing is written). Each item then lives as
// any treasury-funded payout does; a failed one gives its USDC back to the treasury. The batch is completed when every
// item is completed or failed, and says so in one event. Its counts are derived from its items, never kept by hand.
// Its creation (pricing, the items funded and the treasury debited, one plan) is payout-batch-create.ts: the module
// that moves a transaction's status (transaction-moves.ts, through followBatch here) never imports it.

type Queryable = Pick<DataSource | EntityManager, 'query'>;

export const MAX_BATCH_ITEMS = 500;
export interface PayoutBatchItemInput {
  beneficiary_id: string;
  /** Fiat (`currency`): what the beneficiary receives. USDC (`asset`): the item's `source.amount`, fees on top. */
  amount: { currency: string; value: string } | { asset: 'USDC'; value: string };
  external_reference?: string;
}

export interface CreatePayoutBatchInput {
  items: PayoutBatchItemInput[];
  external_reference?: string;
}

export interface BatchRow {
  id: string;
  business_id: string;
  environment: 'sandbox' | 'live';
  status: PayoutBatchStatus;
  items_count: number;
  total_usdc: string;
  external_reference: string | null;
  completed_count: number;
  failed_count: number;
  completed_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

interface ItemRow {
  id: string;
  payout_batch_index: number;
  beneficiary_id: string;
  status: string;
  external_reference: string | null;
  failure: { code: string; message: string } | null;
}

export const BATCH_COLUMNS = `b.id, b.business_id, b.environment, b.status, b.items_count, b.total_usdc::text, b.external_reference, b.completed_at, b.created_at, b.updated_at,
  (SELECT count(*)::int FROM transactions x WHERE x.payout_batch_id = b.id AND x.status = 'completed') AS completed_count,
  (SELECT count(*)::int FROM transactions x WHERE x.payout_batch_id = b.id AND x.status = 'failed') AS failed_count`;

/** The batch as the API and its event show it; `items` on creation, detail and the event (a list leaves them out). */
export function batchView(row: BatchRow, items?: ItemRow[]): Record<string, unknown> {
  return {
    id: row.id,
    status: row.status,
    items_count: row.items_count,
    total_usdc: formatAmount(row.total_usdc, USDC_SCALE),
    completed_count: row.completed_count,
    failed_count: row.failed_count,
    external_reference: row.external_reference,
    ...(items ? {
      items: items.map((i) => ({
        index: i.payout_batch_index, beneficiary_id: i.beneficiary_id, transaction_id: i.id, status: i.status, external_reference: i.external_reference,
        failure: i.failure ? { code: i.failure.code, message: i.failure.message } : null,
      })),
    } : {}),
    completed_at: row.completed_at ? row.completed_at.toISOString() : null,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

async function itemsOf(q: Queryable, batchId: string): Promise<ItemRow[]> {
  return q.query(
    `SELECT id, payout_batch_index, beneficiary_id, status, external_reference, failure FROM transactions WHERE payout_batch_id = $1 ORDER BY payout_batch_index`, [batchId],
  );
}

/** GET /payout-batches/{id}: the batch with its items (404 outside the caller's business and environment). */
export async function findBatchView(q: Queryable, scope: EventScope, id: string): Promise<Record<string, unknown>> {
  const row = await findScoped<BatchRow>(q, { from: 'payout_batches b', columns: BATCH_COLUMNS, resource: 'payout batch' }, scope, id);
  return batchView(row, await itemsOf(q, id));
}

/** The currencies (with a usable off-ramp corridor here) of the batch's beneficiaries: the rates its pricing needs. */
export async function currenciesToPrice(q: Queryable, config: Config, scope: EventScope, input: CreatePayoutBatchInput): Promise<string[]> {
  const rows: { currency: string; payment_method: string }[] = await q.query(
    `SELECT DISTINCT currency, payment_method FROM beneficiaries WHERE id = ANY($1::uuid[]) AND business_id = $2 AND environment = $3 AND status = 'active'`,
    [[...new Set(input.items.map((i) => i.beneficiary_id))], scope.businessId, scope.environment],
  );
  const usable = rows.filter((r) => {
    try {
      return Boolean(rampCorridor(config, scope.environment, r.currency, r.payment_method, 'offramp'));
    } catch {
      return false;
    }
  });
  return [...new Set(usable.map((r) => r.currency))].sort();
}

/**
 * An item ended (completed or failed), in its own unit: once no item of the batch is still under way, the batch is
 * completed and announced. The batch row is locked first, so of two items ending together the later one sees both.
 */
export async function followBatch(unit: Unit, tx: TransactionRow): Promise<void> {
  if (!tx.payout_batch_id || (tx.status !== 'completed' && tx.status !== 'failed')) return;
  const batchId = tx.payout_batch_id;
  const [batch]: { status: PayoutBatchStatus }[] = await unit.em.query(`SELECT status FROM payout_batches WHERE id = $1 FOR NO KEY UPDATE`, [batchId]);
  if (batch?.status !== 'processing') return;
  const [{ open }]: { open: number }[] = await unit.em.query(
    `SELECT count(*)::int AS open FROM transactions WHERE payout_batch_id = $1 AND status NOT IN ('completed', 'failed')`, [batchId],
  );
  if (open > 0) return;
  await transition<PayoutBatchStatus, { id: string }>(unit, PAYOUT_BATCH_MACHINE, {
    scope: scopeOf(tx), id: batchId, to: 'completed', expected: 'processing', set: { completed_at: NOW },
    view: () => findBatchView(unit.em, scopeOf(tx), batchId),
  });
}
