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
import { payoutEntry, refundOfframp } from './offramps.js';
import { fiatRefundResult } from './onramp-refunds.js';
import { TRANSACTION_COLUMNS, moveTransaction, scopeOf, type TransactionRow } from './transactions.js';
import { NOW } from './transition.js';

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

/** The payout whose latest Transaction Status query has this id (a status result may not echo our Occasion). */
async function payoutQueriedBy(unit: Unit, queryId: string): Promise<string | undefined> {
  const rows: { reference: string }[] = await unit.em.query(
    `SELECT reference FROM provider_requests WHERE environment = 'live' AND kind = 'payout' AND (outcome->>'queried' = $1 OR outcome->'queries' @> to_jsonb($1::text))`, [queryId],
  );
  return rows[0]?.reference;
}

/** What a payout result says beyond its outcome (see ProviderCallback). */
type PayoutFacts = Pick<ProviderCallback, 'absent' | 'ended' | 'queryId' | 'timedOut' | 'receipt' | 'claim'>;

/**
 * processing -> completed, or failed with the refund (permanent). A permanent failure M-Pesa's result callback claims
 * is only kept, and Transaction Status asked at once: its result saying the payout ended unpaid refunds; one saying
 * Completed, or not found, contradicts the claim. A result saying the request did not pay (M-Pesa's own temporary
 * result, a status "not found") sends it again after a backoff while PROVIDER_MAX_ATTEMPTS allows, then
 * action_required (retry sends again). A queue timeout says nothing: the status is asked at once.
 */
export async function settlePayout(unit: Unit, config: Config, tx: TransactionRow, outcome: ProviderOutcome, facts: PayoutFacts = {}): Promise<string> {
  if (tx.status === 'funded') throw new ResultTooEarlyError();
  // An on-ramp's only payout is the fiat it pays back to its payer after a failed delivery.
  if (tx.direction !== 'offramp') return fiatRefundResult(unit, tx, outcome, facts);
  if (facts.queryId && !(await queriedSinceSend(unit, tx.id, facts.queryId))) return 'stale status result';
  if (facts.timedOut) return askStatusNow(unit, tx, 't');
  const reference = outcome.provider_reference ?? tx.provider_reference;
  const claimed = facts.queryId ? await claimedFailure(unit, tx.id) : null;
  if (claimed) {
    if (facts.ended) return tx.status === 'processing' ? failPayout(unit, config, tx, claimed, reference) : `unchanged (${tx.status})`;
    if (facts.absent || outcome.status === 'succeeded') contradicted('payout', tx.id, facts.absent ? 'Transaction Status has no record of it' : 'Transaction Status says Completed');
  }
  if (facts.absent) return payoutAbsent(unit, config, tx, outcome, facts.queryId);
  if (tx.status !== 'processing') return `unchanged (${tx.status})`;
  if (outcome.status === 'succeeded') {
    await keepFinal(unit, tx.id, outcome);
    await moveTransaction(unit, tx, 'completed', { set: { completed_at: NOW, provider_reference: reference, receipt: facts.receipt ?? outcome.receipt ?? null }, ledger: () => payoutEntry(tx) });
    return 'completed';
  }
  if (outcome.status === 'rejected' || outcome.status === 'declined') {
    if (!facts.claim) return failPayout(unit, config, tx, outcome, reference);
    // The claim waits beside the request for Transaction Status to say the payout ended unpaid.
    await unit.em.query(
      `UPDATE provider_requests SET outcome = outcome || jsonb_build_object('claimed', $2::jsonb), updated_at = now()
        WHERE environment = 'live' AND kind = 'payout' AND reference = $1 AND outcome->>'status' NOT IN ('succeeded', 'declined', 'rejected')`,
      [tx.id, JSON.stringify(outcome)],
    );
    return askStatusNow(unit, tx, 'c');
  }
  return 'pending';
}

/** Transaction Status is asked at once about the payout's latest send (`why`: t a queue timeout, c a claimed failure). */
async function askStatusNow(unit: Unit, tx: TransactionRow, why: 't' | 'c'): Promise<string> {
  if (tx.status !== 'processing') return `unchanged (${tx.status})`;
  const [{ sends }] = await requestRow(unit, tx.id);
  await unit.stage(providerJobs.check({ transactionId: tx.id, round: 1, after: `${why}${sends}` }, 0), scopeOf(tx));
  return why === 't' ? 'asking status' : 'corroborating';
}

/** The permanent failure a result callback claimed for the payout's latest send, awaiting Transaction Status. */
async function claimedFailure(unit: Unit, reference: string): Promise<ProviderOutcome | null> {
  const [row] = await requestRow(unit, reference);
  return (row?.outcome.claimed as ProviderOutcome | undefined) ?? null;
}

/** M-Pesa refused the payout for good: the refund goes out, and the answer is kept for any later request. */
async function failPayout(unit: Unit, config: Config, tx: TransactionRow, outcome: ProviderOutcome, reference: string | null): Promise<string> {
  await keepFinal(unit, tx.id, outcome);
  const refund = await refundOfframp(unit, chainFor(tx.environment, config), tx);
  const failure = { code: outcome.failure?.code ?? 'payout_rejected', message: outcome.failure?.message ?? 'M-Pesa refused the payout.' };
  await moveTransaction(unit, tx, 'failed', { set: { failure, refund, provider_reference: reference }, reason: failure.code });
  return 'failed';
}

async function requestRow(unit: Unit, reference: string): Promise<{ sends: number; outcome: Record<string, unknown> }[]> {
  return unit.em.query(`SELECT sends, outcome FROM provider_requests WHERE environment = 'live' AND kind = 'payout' AND reference = $1 FOR UPDATE`, [reference]);
}

/** Whether a status result answers a status query made since the payout last left (an older one may predate a send). */
async function queriedSinceSend(unit: Unit, reference: string, queryId: string): Promise<boolean> {
  const [row] = await requestRow(unit, reference);
  return row?.outcome.queried === queryId || ((row?.outcome.queries as string[] | undefined) ?? []).includes(queryId);
}

/** M-Pesa's final answer is kept, so a later request for the same reference answers it without asking again. */
async function keepFinal(unit: Unit, reference: string, outcome: ProviderOutcome): Promise<void> {
  await unit.em.query(
    `UPDATE provider_requests SET outcome = $2, updated_at = now() WHERE environment = 'live' AND kind = 'payout' AND reference = $1
        AND outcome->>'status' NOT IN ('succeeded', 'declined', 'rejected')`,
    [reference, JSON.stringify(outcome)],
  );
}

/**
 * M-Pesa says the request did not pay: marked `absent` (the next send goes without asking), and sent again at once
 * while processing and PROVIDER_MAX_ATTEMPTS allows; else action_required, where retry sends.
 */
async function payoutAbsent(unit: Unit, config: Config, tx: TransactionRow, outcome: ProviderOutcome, queryId?: string): Promise<string> {
  const marked = await updateReturning<{ sends: number }>(unit.em,
    `UPDATE provider_requests SET outcome = $2, updated_at = now() WHERE environment = 'live' AND kind = 'payout' AND reference = $1
        AND outcome->>'status' NOT IN ('succeeded', 'declined', 'rejected') AND ($3::text IS NULL OR outcome->>'queried' = $3 OR outcome->'queries' @> to_jsonb($3::text)) RETURNING sends`,
    [tx.id, JSON.stringify({ ...outcome, absent: true }), queryId ?? null],
  );
  if (!marked[0]) return 'unchanged (final)';
  if (tx.status !== 'processing') return `unchanged (${tx.status}), may be sent again`;
  const { sends } = marked[0];
  if (sends < config.providerMaxAttempts) {
    await unit.stage(providerJobs.resend(tx.id, sends + 1, config.providerRetryBaseMs * 2 ** Math.max(sends - 1, 0)), scopeOf(tx));
    return 'sending again';
  }
  const failure = { code: 'provider_unavailable', message: `${outcome.failure?.message ?? 'M-Pesa could not complete the payout for now.'} (after ${sends} attempts)` };
  await moveTransaction(unit, tx, 'action_required', { set: { stalled_at: 'funded', failure }, reason: 'provider_unavailable' });
  return 'action_required';
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
