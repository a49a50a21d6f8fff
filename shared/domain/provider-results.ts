// A fiat provider's asynchronous result (a callback, a status query's answer) applied to what it concerns: an
// on-ramp's collection, an off-ramp's payout, or a payment intent's collection. Every move is a conditional
// transition from the step that waits for it, so a duplicated, late or out-of-order result changes nothing.
import type { Config } from '../config.js';
import { updateReturning, type Unit } from '../db/unit-of-work.js';
import { chainFor } from '../chain/sandbox-chain.js';
import { logger } from '../logger.js';
import { callbacksContradicted } from '../metrics.js';
import { isFinalOutcome, type ProviderCallback, type ProviderKind, type ProviderOutcome } from '../providers/provider.js';
import type { JobRequest } from '../queues/producer.js';
import { statusQueryAfterMs } from '../providers/live-rails.js';
import { jobId } from '../queues/registry.js';
import { applyCollection, collectionRequestFor, ResultTooEarlyError, type CollectionRequest } from './collection-results.js';
import { decidePayoutIn } from './payout-moves.js';
import { fiatRefundResult, onrampRefundJobs } from './onramp-refunds.js';
import { answerOfOutcome, decidePayout, type PayoutAnswer, type PayoutFact, type PayoutRequestState } from '../kernel/payout-answers.js';
import { TRANSACTION_COLUMNS, scopeOf, type TransactionRow } from './transactions.js';
import { decideStatusAnswer } from '../kernel/provider-records.js';
import { settleRequest } from '../providers/provider-requests.js';

export { ResultTooEarlyError };

/**
 * What a provider check is about: a transaction's request (`after` names which one: `r<retry count>` for a step's
 * request, `s<n>` for a payout sent again, `sweep` for the sweeper's), or a payment intent's collection attempt. Each
 * request gets its own chain of checks, so a retried transaction is checked again.
 */
/** `series`: a later series of checks for the same intent prompt (the sweeper's), with job ids of its own. */
export type CheckSubject = { transactionId: string; round: number; after: string } | { intentId: string; attempt: number; round: number; series?: number };

export const providerJobs = {
  /** After DARAJA_ (or MOMO_) STATUS_QUERY_AFTER_MS without a result, the provider is asked (STK Query, Transaction Status). */
  check: (subject: CheckSubject, delayMs: number): JobRequest<'provider.check'> => ({
    name: 'provider.check',
    id: 'transactionId' in subject
      ? jobId('provider.check', subject.transactionId, subject.after, String(subject.round))
      : jobId('provider.check', subject.intentId, String(subject.attempt), ...(subject.series ? [`s${subject.series}`] : []), String(subject.round)),
    data: subject,
    delayMs,
  }),
  callback: (callbackId: string): JobRequest<'provider.callback'> => ({ name: 'provider.callback', id: jobId('provider.callback', callbackId), data: { callbackId } }),
  resend: (transactionId: string, send: number, delayMs: number): JobRequest<'payout.resend'> => ({
    name: 'payout.resend', id: jobId('payout.resend', transactionId, String(send)), data: { transactionId, send }, delayMs,
  }),
};

async function txBy(unit: Unit, where: string, value: string): Promise<TransactionRow | undefined> {
  const rows: TransactionRow[] = await unit.em.query(`SELECT ${TRANSACTION_COLUMNS} FROM transactions t WHERE t.environment = 'live' AND ${where} = $1 FOR NO KEY UPDATE`, [value]);
  return rows[0];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * What the provider's own status query said of a callback's claim before it is applied (CONTRACT §14): `confirmed`
 * (the query agrees), or `contradicted` (the query, or the request the claim names, says otherwise: nothing moves).
 */
export type Corroboration = { request: CollectionRequest; confirmed: true } | { request?: CollectionRequest; contradicted: string };

/** A callback the provider's query (or the request it names) contradicts changes nothing: logged and counted. */
export function contradicted(kind: ProviderKind, reference: string | null, why: string, provider = 'mpesa_daraja'): string {
  callbacksContradicted.inc({ provider, kind });
  logger().warn({ provider, kind, reference, why }, 'provider callback contradicted');
  return 'contradicted';
}

/**
 * Whether a result is a callback's claim that moves something only once the provider's status query corroborates it:
 * a collection's success (money in) or decline (the on-ramp fails, the intent waits again), never on the callback alone.
 */
export function needsCorroboration(result: ProviderCallback): boolean {
  return result.kind === 'collection' && result.claim === true && isFinalOutcome(result.outcome);
}

/**
 * Finds the transaction or intent the result names and applies it; a result for nothing of ours is only recorded. A
 * collection success or decline from a callback is applied only as `check` corroborated it.
 */
export async function applyProviderResult(unit: Unit, config: Config, result: ProviderCallback, check?: Corroboration): Promise<string> {
  const { outcome } = result;
  if (result.kind === 'collection') {
    if (!outcome.provider_reference && !result.reference) return 'no reference';
    if (check && 'contradicted' in check) return contradicted('collection', check.request?.reference ?? null, check.contradicted);
    if (needsCorroboration(result) && !check) return 'uncorroborated';
    const request = check?.request ?? (await collectionRequestFor(unit.em, result));
    if (!request) throw new ResultTooEarlyError();
    return applyCollection(unit, config, request.reference, { ...outcome, receipt: result.receipt ?? outcome.receipt });
  }
  const byQuery = result.queryId ? await payoutQueriedBy(unit, result.queryId) : undefined;
  const reference = result.reference && UUID.test(result.reference) ? result.reference : byQuery;
  const tx = (reference ? await txBy(unit, 't.id', reference) : undefined)
    ?? (result.conversationId ? await txBy(unit, 't.provider_reference', result.conversationId) : undefined);
  if (!tx) {
    if (reference || result.queryId) return 'not ours';
    throw new ResultTooEarlyError();
  }
  return settlePayout(unit, config, tx, outcome, result);
}

/** The payout a Transaction Status query asked since its latest send is about (a status result may not echo our Occasion). */
async function payoutQueriedBy(unit: Unit, queryId: string): Promise<string | undefined> {
  const rows: { reference: string }[] = await unit.em.query(
    `SELECT reference FROM provider_requests WHERE environment = 'live' AND kind = 'payout' AND status_queries @> ARRAY[$1::text]`, [queryId],
  );
  return rows[0]?.reference;
}

/** What a payout result says beyond its outcome (see ProviderCallback). */
type PayoutFacts = Pick<ProviderCallback, 'answer' | 'queryId' | 'timedOut' | 'receipt' | 'claim' | 'conversationId'>;

/** A payout request row, locked, as the decisions read it. */
export async function payoutRequestOf(unit: Unit, reference: string, environment: 'sandbox' | 'live' = 'live'): Promise<(PayoutRequestState & { claimedOutcome: ProviderOutcome | null }) | null> {
  const [row]: { environment: 'sandbox' | 'live'; status: string; answer: PayoutAnswer | null; conversation_id: string | null; sends: number; status_queries: string[]; claimed: ProviderOutcome | null }[] = await unit.em.query(
    `SELECT environment, status, answer, conversation_id, sends, status_queries, claimed
       FROM provider_requests WHERE environment = $2 AND kind = 'payout' AND reference = $1 FOR UPDATE`, [reference, environment]);
  if (!row) return null;
  return {
    environment: row.environment, status: row.status, answer: row.answer, conversationId: row.conversation_id, sends: row.sends, queries: row.status_queries,
    claimed: row.claimed ? answerOfOutcome(row.claimed.status) : null, claimedOutcome: row.claimed,
  };
}

/** The fact a payout result is: a Result callback's claim, a queue timeout, or a status answer (a query's, a request's own). */
function payoutFact(outcome: ProviderOutcome, facts: PayoutFacts): PayoutFact {
  if (facts.timedOut) return { type: 'queue_timeout', conversationId: facts.conversationId ?? null };
  const said = answerOfOutcome(outcome.status);
  if (facts.claim && !facts.queryId && said) return { type: 'result', said, conversationId: facts.conversationId ?? null };
  const about = facts.queryId ? { queryId: facts.queryId } : { requestId: outcome.provider_reference };
  return { type: 'status', said: facts.answer === undefined ? said : facts.answer, ...about };
}

/**
 * A payout result applied by the payout rules (shared/kernel/payout-answers.ts): a Result about an earlier request
 * changes nothing; any Result about the latest (its success too), or a queue timeout, is only a reason to ask
 * Transaction Status at once. A status answer about the latest request is its final answer: paid completes, failed
 * for good fails with the refund, not paid for now (or no record) sends it again after a backoff while
 * PROVIDER_MAX_ATTEMPTS allows, then action_required (retry or refund). An on-ramp's fiat refund follows the same rules.
 */
export async function settlePayout(unit: Unit, config: Config, tx: TransactionRow, outcome: ProviderOutcome, facts: PayoutFacts = {}): Promise<string> {
  if (tx.status === 'funded') throw new ResultTooEarlyError();
  const request = await payoutRequestOf(unit, tx.id, tx.environment);
  if (!request) return 'no request of ours';
  const refund = tx.direction !== 'offramp';
  if (refund && tx.refund_status !== 'pending') return `unchanged (refund ${tx.refund_status ?? 'none'})`;
  const plan = decidePayout(request, payoutFact(outcome, facts), refund ? Infinity : config.providerMaxAttempts);
  if (plan.do === 'wait') throw new ResultTooEarlyError();
  if (plan.do === 'ignore') return `unchanged (${plan.why})`;
  if ('contradicted' in plan && plan.contradicted) contradicted('payout', tx.id, plan.contradicted);
  if (plan.do === 'ask') return askStatus(unit, tx, request.sends, plan.why, plan.claim ? { ...outcome, receipt: facts.receipt ?? outcome.receipt } : undefined);
  // A status "Failed" that gave no reason is told by the failure the Result claimed.
  const said = plan.do === 'fail' && outcome.status !== 'rejected' && request.claimedOutcome ? request.claimedOutcome : outcome;
  await recordAnswer(unit, tx.id, plan.record, said);
  if (refund) return fiatRefundResult(unit, tx, plan.do, { ...said, receipt: facts.receipt ?? said.receipt }, resendDelayMs(config, request.sends), request.sends);
  if (tx.status !== 'processing') return `unchanged (${tx.status})${plan.do === 'resend' || plan.do === 'stall' ? ', may be sent again' : ''}`;
  const reference = outcome.provider_reference ?? tx.provider_reference;
  if (plan.do === 'complete') {
    const receipt = facts.receipt ?? outcome.receipt ?? request.claimedOutcome?.receipt ?? null;
    return decidePayoutIn(unit, null, tx.id, { kind: 'paid', providerReference: reference, receipt });
  }
  if (plan.do === 'fail') {
    // M-Pesa refused the payout for good: the refund goes out.
    const failure = { code: said.failure?.code ?? 'payout_rejected', message: said.failure?.message ?? 'M-Pesa refused the payout.' };
    return decidePayoutIn(unit, chainFor(tx.environment, config), tx.id, { kind: 'refused', providerReference: reference, failure });
  }
  if (plan.do === 'resend') {
    await unit.stage(providerJobs.resend(tx.id, request.sends + 1, resendDelayMs(config, request.sends)), scopeOf(tx));
    return 'sending again';
  }
  const failure = { code: 'provider_unavailable', message: `${outcome.failure?.message ?? 'M-Pesa could not complete the payout for now.'} (after ${request.sends} attempts)` };
  return decidePayoutIn(unit, null, tx.id, { kind: 'stalled', failure });
}

/** The backoff before a payout's next request. */
export function resendDelayMs(config: Config, sends: number): number {
  return config.providerRetryBaseMs * 2 ** Math.min(Math.max(sends - 1, 0), 8);
}

/**
 * Transaction Status is asked at once about the payout's latest request (a queue timeout, or a claim kept beside the
 * request meanwhile). An on-ramp's refund asks through its own job, whose request asks before sending again.
 */
async function askStatus(unit: Unit, tx: TransactionRow, sends: number, why: 'timeout' | 'claim' | 'unmatched', claim?: ProviderOutcome): Promise<string> {
  const tag = why === 'timeout' ? 't' : why === 'claim' ? 'c' : 'u';
  if (tx.direction === 'offramp' && tx.status !== 'processing') return `unchanged (${tx.status})`;
  if (claim) {
    await unit.em.query(`UPDATE provider_requests SET claimed = $2, updated_at = now() WHERE environment = 'live' AND kind = 'payout' AND reference = $1 AND answer IS NULL`, [tx.id, JSON.stringify(claim)]);
  }
  if (tx.direction !== 'offramp') await unit.stage(onrampRefundJobs.pay(tx.id, `${tag}${sends}`), scopeOf(tx));
  else await unit.stage(providerJobs.check({ transactionId: tx.id, round: 1, after: `${tag}${sends}` }, 0), scopeOf(tx));
  return why === 'claim' ? 'corroborating' : 'asking status';
}

/** The final answer about the latest request is kept with the provider's word, so a later request reads it without asking. */
async function recordAnswer(unit: Unit, reference: string, answer: PayoutAnswer, outcome: ProviderOutcome): Promise<void> {
  await settleRequest(unit.em, { environment: 'live', kind: 'payout', reference }, (r) => decideStatusAnswer(r, answer, outcome), true);
}

/** Checks before a request that never got its result is handed to the business (action_required). */
export const MAX_CHECK_ROUNDS = 5;
/**
 * A payment intent's prompt M-Pesa named but never gave a final answer for (its STK Query down or undecided): asked
 * this many times in all, the later ones four intervals apart, before the intent waits for payment again. A
 * payment reported after that is still credited, as a late one.
 */
export const INTENT_CHECK_ROUNDS = 15;

/** An accepted request (`pending`) waits for its callback; if none comes in time, the provider is asked. */
export async function awaitResult(unit: Unit, config: Config, subject: CheckSubject, outcome: ProviderOutcome, scope: { businessId: string; environment: 'sandbox' | 'live' }, currency: string): Promise<void> {
  if (outcome.status === 'pending') await unit.stage(providerJobs.check(subject, statusQueryAfterMs(config, currency)), scope);
}
