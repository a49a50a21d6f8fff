import type { DataSource, EntityManager } from 'typeorm';
import type { JobRequest } from '../queues/producer.js';
import { quoteJobs } from './quotes.js';
import { jobForStep, txJobs } from './lifecycle-jobs.js';
import type { Environment } from './chains.js';
import type { TransactionStatus } from './machines.js';
import { intentJobs } from './payment-intents.js';
import { depositJobs } from './treasury-deposits.js';
import { webhookJobs } from '../webhooks/delivery.js';
import { providerJobs } from './provider-results.js';
import { AUTO_REFUND_CODES, refundJob } from './refunds.js';

// What the sweeper looks for: rows stuck in a state whose job should have moved them (the job never reached Redis,
// Redis lost it, it failed for good without a handler). Each rule finds them by age and names the job, with the same
// deterministic id, that moves them on. Later resources add their rules here.
export interface StuckRule {
  name: string;
  find(q: Pick<DataSource | EntityManager, 'query'>, limit: number): Promise<JobRequest[]>;
}

const STALE_AFTER_SECONDS = 10;
/** A transaction step that has not moved for this long has lost its job (steps take milliseconds to seconds). */
const TRANSACTION_STALE_SECONDS = 60;
/**
 * Longer than a live request's whole check schedule at the default DARAJA_STATUS_QUERY_AFTER_MS (5 checks a minute
 * apart, then action_required): a transaction still waiting on M-Pesa after this has lost its check job.
 */
const PROVIDER_STALE_SECONDS = 600;

interface StuckTransaction {
  id: string;
  retry_count: number;
  environment: Environment;
  direction: 'offramp' | 'onramp';
  status: TransactionStatus;
  funding_type: string | null;
}

export interface Redrive {
  statuses: TransactionStatus[];
  direction?: 'offramp' | 'onramp';
  environment?: Environment;
  staleSeconds: number;
  job: (tx: StuckTransaction) => JobRequest | null;
}

/**
 * Every transaction status that is not terminal, and what moves it on when its job is lost (Redis flushed, a job
 * that never reached it): the one table the sweeper reads for transactions. A status missing here waits on a person:
 * action_required (the business retries or refunds; underpaid and late deposits are refunded on their own, by the
 * refund-due rule below); failed and completed are terminal, and a refund still owed is re-driven by the rules below.
 */
export const TRANSACTION_REDRIVES: Redrive[] = [
  // An on-ramp's collection request; a managed wallet's send (an external wallet's off-ramp waits for its transfer:
  // the settlement's expiry, below, moves it on).
  { statuses: ['created', 'signing', 'submitting'], staleSeconds: TRANSACTION_STALE_SECONDS, job: (tx) => jobForStep(tx, tx.status, 0, 0) },
  // An off-ramp's confirmations are counted.
  { statuses: ['awaiting_funds'], direction: 'offramp', staleSeconds: TRANSACTION_STALE_SECONDS, job: (tx) => jobForStep(tx, tx.status, 0, 0) },
  // A sandbox on-ramp's prompt is answered by its collection job, asked again under the same id.
  { statuses: ['awaiting_funds'], direction: 'onramp', environment: 'sandbox', staleSeconds: TRANSACTION_STALE_SECONDS, job: (tx) => txJobs.collect(tx) },
  // Live, waiting on M-Pesa (a prompt's answer): the provider is asked what it did with our reference.
  { statuses: ['awaiting_funds'], direction: 'onramp', environment: 'live', staleSeconds: PROVIDER_STALE_SECONDS, job: (tx) => providerJobs.check({ transactionId: tx.id, round: 1, after: 'sweep' }, 0) },
  // The payout is sent, or the on-ramp's USDC delivered.
  { statuses: ['funded'], staleSeconds: TRANSACTION_STALE_SECONDS, job: (tx) => jobForStep(tx, tx.status, 0, 0) },
  // An on-ramp's delivery is staged again under its reference (the hot wallet's send is made once, and checked).
  { statuses: ['processing'], direction: 'onramp', staleSeconds: TRANSACTION_STALE_SECONDS, job: (tx) => txJobs.deliver(tx) },
  // A payout waiting on M-Pesa (its callback, a status check, a re-send): the provider is asked. The sandbox provider
  // answers a payout at once, in the payout job's own unit, so it never waits here; the same check settles it if it did.
  { statuses: ['processing'], direction: 'offramp', staleSeconds: PROVIDER_STALE_SECONDS, job: (tx) => providerJobs.check({ transactionId: tx.id, round: 1, after: 'sweep' }, 0) },
];

function redriveWhere(r: Redrive): string {
  return [`t.status IN (${r.statuses.map((x) => `'${x}'`).join(', ')})`, r.direction && `t.direction = '${r.direction}'`, r.environment && `t.environment = '${r.environment}'`]
    .filter(Boolean).join(' AND ');
}

/** Jobs staged in the outbox (kept a day after dispatch) that match `where` (over `o`), requeued from their payload. */
function outboxRule(name: string, staleSeconds: number, where: string): StuckRule {
  return rule<{ job_name: string; job_id: string; payload: Record<string, unknown> }>(name, staleSeconds,
    `SELECT DISTINCT ON (o.job_id) o.job_name, o.job_id, o.payload FROM outbox_jobs o WHERE o.dispatched_at IS NOT NULL AND ${where} ORDER BY o.job_id, o.id LIMIT $2`,
    (r) => ({ name: r.job_name, id: r.job_id, data: r.payload }) as JobRequest);
}

/** A rule from its query (`$1` is how many seconds make a row stale, `$2` the limit) and the job each row needs. */
function rule<R>(name: string, staleSeconds: number, sql: string, jobOf: (row: R) => JobRequest | null): StuckRule {
  return {
    name,
    async find(q, limit) {
      const rows: R[] = await q.query(sql, [staleSeconds, limit]);
      return rows.map(jobOf).filter((j): j is JobRequest => j !== null);
    },
  };
}

const STALE = 'now() - make_interval(secs => $1)';

export const STUCK_RULES: StuckRule[] = [
  rule<{ id: string }>('quotes pending without a price', STALE_AFTER_SECONDS,
    `SELECT id FROM quotes WHERE status = 'pending' AND created_at < ${STALE} ORDER BY created_at LIMIT $2`, (r) => quoteJobs.price(r.id)),
  rule<{ id: string }>('quotes available past their expiry', STALE_AFTER_SECONDS,
    `SELECT id FROM quotes WHERE status = 'available' AND expires_at < ${STALE} ORDER BY expires_at LIMIT $2`, (r) => quoteJobs.expire(r.id, 0)),
  ...TRANSACTION_REDRIVES.map((r) => rule<StuckTransaction>(`transactions ${[r.environment, r.direction].filter(Boolean).join(' ')} ${r.statuses.join('/')}`.replace(/ +/g, ' '), r.staleSeconds,
    `SELECT t.id, t.retry_count, t.environment, t.direction, t.status, t.funding_type FROM transactions t
      WHERE ${redriveWhere(r)} AND t.updated_at < ${STALE} ORDER BY t.updated_at LIMIT $2`,
    r.job)),
  // A hot-wallet send (a delivery, a refund) or a sweep whose job was lost, or that gave up (the hot wallet dry for
  // hours): its staged job, from the outbox that staged it, runs again under its own id (the send is recorded per
  // reference, so it is never made twice).
  outboxRule('refunds still pending or failed', TRANSACTION_STALE_SECONDS,
    `o.job_name = 'chain.send' AND o.payload->>'purpose' = 'refund' AND EXISTS (
       SELECT 1 FROM transactions t WHERE t.id = (o.payload->>'transactionId')::uuid AND t.refund->>'status' IN ('pending', 'failed') AND t.updated_at < ${STALE})`),
  outboxRule('sweeps sent and not yet mined', TRANSACTION_STALE_SECONDS,
    `o.job_name = 'settlement.sweep' AND EXISTS (
       SELECT 1 FROM chain_sends c WHERE c.reference = 'sweep-' || (o.payload->>'id') || '-' || (o.payload->>'round') AND c.status = 'sent' AND c.updated_at < ${STALE})`),
  // USDC an off-ramp holds past its refund's due time (an excess after the payout, an underpaid or late deposit left
  // waiting): the delayed job staged with the deadline does it; this is the net for one that was lost.
  rule<{ id: string; refund_due_at: Date }>('off-ramp refunds past their due time', STALE_AFTER_SECONDS,
    `SELECT id, refund_due_at FROM transactions
      WHERE refund_due_at < ${STALE} AND (status = 'completed' OR (status = 'action_required' AND failure->>'code' IN (${AUTO_REFUND_CODES.map((c) => `'${c}'`).join(', ')})))
      ORDER BY refund_due_at LIMIT $2`,
    (r) => refundJob(r.id, r.refund_due_at, 0, true)),
  rule<{ transaction_id: string }>('settlements past their expiry', STALE_AFTER_SECONDS,
    `SELECT transaction_id FROM settlements WHERE status = 'awaiting_transfer' AND expires_at < ${STALE} ORDER BY expires_at LIMIT $2`,
    (r) => txJobs.expire(r.transaction_id, 0)),
  rule<{ id: string }>('payment intents awaiting payment past their expiry', STALE_AFTER_SECONDS,
    `SELECT id FROM payment_intents WHERE status = 'awaiting_payment' AND expires_at < ${STALE} ORDER BY expires_at LIMIT $2`, (r) => intentJobs.expire(r.id, 0)),
  // A prompt left unanswered (no callback, the job gone) is asked again under the same attempt: the provider answers
  // what it did with that reference, so the payer is never prompted twice for it.
  rule<{ id: string; collection_attempts: number }>('payment intents whose collection job was lost', TRANSACTION_STALE_SECONDS,
    `SELECT id, collection_attempts FROM payment_intents
      WHERE status = 'processing' AND payer_phone IS NOT NULL AND collection_attempts > 0 AND updated_at < ${STALE} ORDER BY updated_at LIMIT $2`,
    (r) => intentJobs.collect(r.id, r.collection_attempts)),
  rule<{ id: string }>('paid payment intents whose payout never started', TRANSACTION_STALE_SECONDS,
    `SELECT id FROM payment_intents WHERE payout_status = 'pending' AND updated_at < ${STALE} ORDER BY updated_at LIMIT $2`, (r) => intentJobs.payout(r.id)),
  rule<{ id: string }>('treasury deposits still counting confirmations', TRANSACTION_STALE_SECONDS,
    `SELECT id FROM treasury_deposits WHERE status = 'pending' AND updated_at < ${STALE} ORDER BY updated_at LIMIT $2`, (r) => depositJobs.confirm(r.id, 0)),
  // An attempt whose job was lost is made again under the same id (the receiver dedupes on webhook-id anyway).
  rule<{ id: string; round: number; attempts: number }>('webhook deliveries whose attempt was lost', TRANSACTION_STALE_SECONDS,
    `SELECT id, round, attempts FROM webhook_messages WHERE status = 'pending' AND coalesce(next_attempt_at, updated_at) < ${STALE} ORDER BY updated_at LIMIT $2`,
    (r) => webhookJobs.deliver(r.id, r.round, r.attempts + 1)),
];
