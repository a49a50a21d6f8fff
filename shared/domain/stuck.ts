import type { DataSource, EntityManager } from 'typeorm';
import type { JobRequest } from '../queues/producer.js';
import { quoteJobs } from './quotes.js';
import { jobForStep, txJobs } from './lifecycle-jobs.js';
import type { Environment } from './chains.js';
import { intentJobs } from './payment-intents.js';
import { depositJobs } from './treasury-deposits.js';
import { webhookJobs } from '../webhooks/delivery.js';
import { providerJobs } from './provider-results.js';

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
  status: string;
  funding_type: string | null;
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
  rule<StuckTransaction>('transactions whose step job was lost', TRANSACTION_STALE_SECONDS,
    `SELECT id, retry_count, environment, direction, status, funding_type FROM transactions
      WHERE status IN ('created', 'signing', 'awaiting_funds', 'funded') AND updated_at < ${STALE} ORDER BY updated_at LIMIT $2`,
    (tx) => jobForStep(tx, tx.status, 0, 0)),
  rule<{ id: string }>('live transactions waiting on the provider whose status check was lost', PROVIDER_STALE_SECONDS,
    `SELECT id FROM transactions WHERE environment = 'live' AND ((direction = 'onramp' AND status = 'awaiting_funds') OR (direction = 'offramp' AND status = 'processing'))
        AND updated_at < ${STALE} ORDER BY updated_at LIMIT $2`,
    (r) => providerJobs.check({ transactionId: r.id, round: 1, after: 'sweep' }, 0)),
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
