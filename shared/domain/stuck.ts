import type { DataSource, EntityManager } from 'typeorm';
import type { JobRequest } from '../queues/producer.js';
import { quoteJobs } from './quotes.js';
import { jobForStep, txJobs } from './lifecycle-jobs.js';
import type { Environment } from './chains.js';
import type { TransactionStatus } from './machines.js';
import { intentJobs } from './payment-intents.js';
import { depositJobs } from './treasury-deposits.js';
import { withdrawalJobs } from './treasury-withdrawals.js';
import { webhookJobs } from '../webhooks/delivery.js';
import { MAX_CHECK_ROUNDS, providerJobs } from './provider-results.js';
import type { Config } from '../config.js';
import { AUTO_REFUND_CODES, refundJob } from './refunds.js';
import { onrampRefundJobs } from './onramp-refunds.js';
import { liquidationJob } from './liquidation-transfers.js';

// What the sweeper looks for: rows stuck in a state whose job should have moved them (the job never reached Redis,
// Redis lost it, it failed for good without a handler). Each rule finds them by age and names the job, with the same
// deterministic id, that moves them on. Later resources add their rules here.
export interface StuckRule {
  name: string;
  find(q: Pick<DataSource | EntityManager, 'query'>, limit: number, config: Config): Promise<JobRequest[]>;
}

/** How long a row may sit before its job counts as lost, from the configuration. */
type Stale = (config: Config) => number;
/** Past a deadline (an expiry): a few seconds. */
const DEADLINE: Stale = () => 10;
/** Due now: the clock's own expiry rules (EXPIRY_RULES). */
const DUE: Stale = () => 0;
/** A step that has not moved (steps take milliseconds to seconds): SWEEPER_STALE_SECONDS. */
const STEP: Stale = (config) => config.sweeperStaleSeconds;
/**
 * Waiting on M-Pesa: longer than a live request's whole check schedule (MAX_CHECK_ROUNDS checks
 * DARAJA_STATUS_QUERY_AFTER_MS apart, then action_required): a transaction still waiting after it has lost its check.
 */
const PROVIDER: Stale = (config) => config.sweeperStaleSeconds + Math.ceil((Math.max(config.daraja.statusQueryAfterMs, config.momo.statusQueryAfterMs) * (MAX_CHECK_ROUNDS + 1)) / 1000);

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
  stale: Stale;
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
  { statuses: ['created', 'signing', 'submitting'], stale: STEP, job: (tx) => jobForStep(tx, tx.status, 0, 0) },
  // An off-ramp's confirmations are counted.
  { statuses: ['awaiting_funds'], direction: 'offramp', stale: STEP, job: (tx) => jobForStep(tx, tx.status, 0, 0) },
  // A sandbox on-ramp's prompt is answered by its collection job, asked again under the same id.
  { statuses: ['awaiting_funds'], direction: 'onramp', environment: 'sandbox', stale: STEP, job: (tx) => txJobs.collect(tx) },
  // Live, waiting on M-Pesa (a prompt's answer): the provider is asked what it did with our reference.
  { statuses: ['awaiting_funds'], direction: 'onramp', environment: 'live', stale: PROVIDER, job: (tx) => providerJobs.check({ transactionId: tx.id, round: 1, after: 'sweep' }, 0) },
  // The payout is sent, or the on-ramp's USDC delivered.
  { statuses: ['funded'], stale: STEP, job: (tx) => jobForStep(tx, tx.status, 0, 0) },
  // An on-ramp's delivery is staged again under its reference (the hot wallet's send is made once, and checked).
  { statuses: ['processing'], direction: 'onramp', stale: STEP, job: (tx) => txJobs.deliver(tx) },
  // A payout waiting on M-Pesa (its callback, a status check, a re-send): the provider is asked. The sandbox provider
  // answers a payout at once, in the payout job's own unit, so it never waits here; the same check settles it if it did.
  { statuses: ['processing'], direction: 'offramp', stale: PROVIDER, job: (tx) => providerJobs.check({ transactionId: tx.id, round: 1, after: 'sweep' }, 0) },
];

function redriveWhere(r: Redrive): string {
  return [`t.status IN (${r.statuses.map((x) => `'${x}'`).join(', ')})`, r.direction && `t.direction = '${r.direction}'`, r.environment && `t.environment = '${r.environment}'`]
    .filter(Boolean).join(' AND ');
}

/** Jobs staged in the outbox (kept a day after dispatch) that match `where` (over `o`), requeued from their payload. */
function outboxRule(name: string, stale: Stale, where: string): StuckRule {
  return rule<{ job_name: string; job_id: string; payload: Record<string, unknown> }>(name, stale,
    `SELECT DISTINCT ON (o.job_id) o.job_name, o.job_id, o.payload FROM outbox_jobs o WHERE o.dispatched_at IS NOT NULL AND ${where} ORDER BY o.job_id, o.id LIMIT $2`,
    (r) => ({ name: r.job_name, id: r.job_id, data: r.payload }) as JobRequest);
}

/** A rule from its query (`$1` is how many seconds make a row stale, `$2` the limit) and the job each row needs. */
function rule<R>(name: string, stale: Stale, sql: string, jobOf: (row: R) => JobRequest | null): StuckRule {
  return {
    name,
    async find(q, limit, config) {
      const rows: R[] = await q.query(sql, [stale(config), limit]);
      return rows.map(jobOf).filter((j): j is JobRequest => j !== null);
    },
  };
}

const STALE = 'now() - make_interval(secs => $1)';

// Quotes and settlements expire by the clock: a job every second finds the ones due (a partial index each) and
// enqueues their expiry under its own id, instead of a delayed job per quote and per settlement that nearly all
// outlive what they guard (a quote is taken in seconds; a managed wallet's settlement is funded at once).
const quotesPastExpiry = (stale: Stale) => rule<{ id: string }>('quotes available past their expiry', stale,
  `SELECT id FROM quotes WHERE status = 'available' AND expires_at < ${STALE} ORDER BY expires_at LIMIT $2`, (r) => quoteJobs.expire(r.id, 0));
const settlementsPastExpiry = (stale: Stale) => rule<{ transaction_id: string }>('settlements past their expiry', stale,
  `SELECT transaction_id FROM settlements WHERE status = 'awaiting_transfer' AND expires_at < ${STALE} ORDER BY expires_at LIMIT $2`,
  (r) => txJobs.expire(r.transaction_id, 0));

/** What the expiry jobs (`expiry.quotes`, `expiry.settlements`) run every second; the sweeper keeps the same rules a few seconds late. */
export const EXPIRY_RULES = { quotes: quotesPastExpiry(DUE), settlements: settlementsPastExpiry(DUE) };

export const STUCK_RULES: StuckRule[] = [
  rule<{ id: string }>('quotes pending without a price', DEADLINE,
    `SELECT id FROM quotes WHERE status = 'pending' AND created_at < ${STALE} ORDER BY created_at LIMIT $2`, (r) => quoteJobs.price(r.id)),
  quotesPastExpiry(DEADLINE),
  ...TRANSACTION_REDRIVES.map((r) => rule<StuckTransaction>(`transactions ${[r.environment, r.direction].filter(Boolean).join(' ')} ${r.statuses.join('/')}`.replace(/ +/g, ' '), r.stale,
    `SELECT t.id, t.retry_count, t.environment, t.direction, t.status, t.funding_type FROM transactions t
      WHERE ${redriveWhere(r)} AND t.updated_at < ${STALE} ORDER BY t.updated_at LIMIT $2`,
    r.job)),
  // A hot-wallet send (a delivery, a refund) or a sweep whose job was lost, or that gave up (the hot wallet dry for
  // hours): its staged job, from the outbox that staged it, runs again under its own id (the send is recorded per
  // reference, so it is never made twice).
  // Only a send still in flight: one that failed is due again under a new reference (the refund-due rule below).
  outboxRule('refund sends still pending', STEP,
    `o.job_name = 'chain.send' AND o.payload->>'purpose' = 'refund' AND EXISTS (
       SELECT 1 FROM transactions t WHERE t.id = (o.payload->>'transactionId')::uuid AND t.refund_status = 'pending' AND t.updated_at < ${STALE}
          AND (t.refund->'sends' IS NULL OR EXISTS (SELECT 1 FROM jsonb_array_elements(t.refund->'sends') e
                WHERE 'refund-' || (e->>'reference') = o.payload->>'reference' AND e->>'status' = 'pending')))`),
  // An on-ramp's fiat refund to its payer still pending (its job gave up, or its result never came): the same payout
  // job again; the provider adapter asks what became of the earlier request before it sends anything.
  outboxRule('on-ramp fiat refunds still pending', PROVIDER,
    `o.job_name = 'onramp.refund' AND EXISTS (
       SELECT 1 FROM transactions t WHERE t.id = (o.payload->>'transactionId')::uuid AND t.direction = 'onramp' AND t.refund_status = 'pending' AND t.updated_at < ${STALE})`),
  // An on-ramp's fiat refund the provider refused for good, past its backoff (its delayed job lost): the same payout
  // job sends it again as a new request (CONTRACT §18). One refused before retries were scheduled has no due time
  // (fiatRefundStep): it may have been paid by hand.
  rule<{ id: string; refund_due_at: Date }>('on-ramp fiat refunds refused, past their backoff', DEADLINE,
    `SELECT id, refund_due_at FROM transactions
      WHERE direction = 'onramp' AND refund_status = 'failed' AND refund_due_at < ${STALE}
      ORDER BY refund_due_at LIMIT $2`,
    (r) => onrampRefundJobs.pay(r.id, `r${r.refund_due_at.getTime()}`)),
  // A live on-ramp's delivery from the hot wallet whose send job was lost or failed for good without its handler (a
  // worker killed under it too often): that staged job again (its send is recorded per reference, never made twice).
  // Staging it anew from onramp.deliver would not do: a failed job's id is taken.
  outboxRule('on-ramp deliveries whose hot-wallet send was lost or gave up', STEP,
    `o.job_name = 'chain.send' AND o.payload->>'purpose' = 'onramp_delivery' AND EXISTS (
       SELECT 1 FROM transactions t WHERE t.id = (o.payload->>'transactionId')::uuid AND t.status = 'processing' AND t.updated_at < ${STALE})`),
  outboxRule('sweeps sent and not yet mined', STEP,
    `o.job_name = 'settlement.sweep' AND EXISTS (
       SELECT 1 FROM chain_sends c WHERE c.reference = 'sweep-' || (o.payload->>'id') || '-' || (o.payload->>'round') AND c.status = 'sent' AND c.updated_at < ${STALE})`),
  // USDC an off-ramp holds past its refund's due time (an excess after the payout, an underpaid or late deposit left
  // waiting, an automatic refund whose send failed, after its backoff, even while a later send is still in flight):
  // the delayed job staged with the deadline does it; this is the net for one that was lost.
  rule<{ id: string; refund_due_at: Date }>('off-ramp refunds past their due time', DEADLINE,
    `SELECT id, refund_due_at FROM transactions
      WHERE refund_due_at < ${STALE} AND direction = 'offramp' AND (status = 'completed' OR (status = 'failed' AND refund_status IN ('failed', 'pending'))
        OR (status = 'action_required' AND failure->>'code' IN (${AUTO_REFUND_CODES.map((c) => `'${c}'`).join(', ')})))
      ORDER BY refund_due_at LIMIT $2`,
    (r) => refundJob(r.id, r.refund_due_at, 0, true)),
  settlementsPastExpiry(DEADLINE),
  rule<{ id: string }>('payment intents awaiting payment past their expiry', DEADLINE,
    `SELECT id FROM payment_intents WHERE status = 'awaiting_payment' AND expires_at < ${STALE} ORDER BY expires_at LIMIT $2`, (r) => intentJobs.expire(r.id, 0)),
  // A prompt left unanswered (no callback, the job gone) is asked again under the same attempt: the provider answers
  // what it did with that reference, so the payer is never prompted twice for it.
  rule<{ id: string; collection_attempts: number }>('payment intents whose collection job was lost', STEP,
    `SELECT i.id, i.collection_attempts FROM payment_intents i
      WHERE i.status = 'processing' AND i.payer_phone_key_id IS NOT NULL AND i.collection_attempts > 0 AND i.updated_at < ${STALE}
        AND NOT EXISTS (SELECT 1 FROM provider_requests p WHERE p.kind = 'collection' AND p.environment = i.environment AND p.reference = i.id::text || '-' || i.collection_attempts)
      ORDER BY i.updated_at LIMIT $2`,
    (r) => intentJobs.collect(r.id, r.collection_attempts)),
  // A prompt that left and has no final answer, whatever its intent did since (paid another way, expired, prompted
  // again: the payer may still pay it), that no check has asked about for a while (its checks lost, or their series
  // over): a new series of checks under ids of its own (the first series' ids may all be spent). Each check touches
  // the request, so a series under way is never doubled; a prompt is asked about for a day at most.
  rule<{ id: string; attempt: number }>('payment intent prompts no check is asking about', PROVIDER,
    `SELECT left(p.reference, 36) AS id, substring(p.reference from 38)::int AS attempt FROM provider_requests p
      WHERE p.kind = 'collection' AND p.reference ~ '^[0-9a-f-]{36}-[0-9]+$' AND p.status IN ('pending', 'sending')
        AND p.updated_at < ${STALE} AND p.created_at > now() - interval '1 day'
        AND EXISTS (SELECT 1 FROM payment_intents i WHERE i.id = left(p.reference, 36)::uuid)
      ORDER BY p.updated_at LIMIT $2`,
    (r) => providerJobs.check({ intentId: r.id, attempt: r.attempt, round: 1, series: Math.floor(Date.now() / 1000) }, 0)),
  // A provider callback stored but never applied (its job lost to a Redis flush, or out of attempts while M-Pesa had no
  // final answer to corroborate it with): applied again; applying marks it processed, once.
  rule<{ id: string }>('provider callbacks stored and never applied', STEP,
    `SELECT id FROM provider_callbacks WHERE processed_at IS NULL AND received_at < ${STALE} ORDER BY received_at LIMIT $2`, (r) => providerJobs.callback(r.id)),
  rule<{ id: string }>('paid payment intents whose payout never started', STEP,
    `SELECT id FROM payment_intents WHERE payout_status = 'pending' AND updated_at < ${STALE} ORDER BY updated_at LIMIT $2`, (r) => intentJobs.payout(r.id)),
  // A transfer to a liquidation address not yet priced into its off-ramp (its job lost, or out of attempts while the
  // rate source was down): priced again under the same id, until it is.
  rule<{ id: string }>('liquidation transfers not yet priced', STEP,
    `SELECT id FROM liquidation_transfers WHERE transaction_id IS NULL AND created_at < ${STALE} ORDER BY created_at LIMIT $2`, (r) => liquidationJob(r.id)),
  // A withdrawal debited the treasury when it was written: its send is staged again until it completes or fails (live,
  // that stages the hot wallet's chain.send under the same reference; the rule below retries one that gave up).
  rule<{ id: string }>('treasury withdrawals still pending', STEP,
    `SELECT w.id FROM treasury_withdrawals w WHERE w.status = 'pending' AND w.updated_at < ${STALE}
        AND NOT EXISTS (SELECT 1 FROM outbox_jobs o WHERE o.job_name = 'chain.send' AND o.payload->>'withdrawalId' = w.id::text)
      ORDER BY w.updated_at LIMIT $2`, (r) => withdrawalJobs.send(r.id)),
  outboxRule('treasury withdrawals whose hot-wallet send was lost or gave up', STEP,
    `o.job_name = 'chain.send' AND o.payload->>'purpose' = 'withdrawal' AND EXISTS (
       SELECT 1 FROM treasury_withdrawals w WHERE w.id = (o.payload->>'withdrawalId')::uuid AND w.status = 'pending' AND w.updated_at < ${STALE})`),
  rule<{ id: string }>('treasury deposits still counting confirmations', STEP,
    `SELECT id FROM treasury_deposits WHERE status = 'pending' AND updated_at < ${STALE} ORDER BY updated_at LIMIT $2`, (r) => depositJobs.confirm(r.id, 0)),
  // An attempt whose job was lost is made again under the same id (the receiver dedupes on webhook-id anyway).
  rule<{ id: string; endpoint_id: string; round: number; attempts: number }>('webhook deliveries whose attempt was lost', STEP,
    `SELECT id, endpoint_id, round, attempts FROM webhook_messages WHERE status = 'pending' AND coalesce(next_attempt_at, updated_at) < ${STALE} ORDER BY updated_at LIMIT $2`,
    (r) => webhookJobs.deliver(r.id, r.endpoint_id, r.round, r.attempts + 1)),
];
