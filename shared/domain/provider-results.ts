// A fiat provider's asynchronous result (a callback, a status query's answer) applied to what it concerns: an
// on-ramp's collection, an off-ramp's payout, or a payment intent's collection. Every move is a conditional
// transition from the step that waits for it, so a duplicated, late or out-of-order result changes nothing.
import type { Config } from '../config.js';
import { updateReturning, type Unit } from '../db/unit-of-work.js';
import { chainFor } from '../chain/sandbox-chain.js';
import { AppError } from '../errors.js';
import type { ProviderCallback, ProviderOutcome } from '../providers/provider.js';
import type { JobRequest } from '../queues/producer.js';
import { jobId } from '../queues/registry.js';
import { stepDelay, txJobs } from './lifecycle-jobs.js';
import { payoutEntry, refundOfframp } from './offramps.js';
import { collectionCameToNothing, collectionFailure, loadPaymentIntent, type PaymentIntentRow } from './payment-intents.js';
import { mobileMoneyPayment, recordPayment } from './treasury-deposits.js';
import { TRANSACTION_COLUMNS, moveTransaction, scopeOf, type TransactionRow } from './transactions.js';
import { NOW } from './transition.js';

/**
 * What a provider check is about: a transaction's request (`after` names which one: `r<retry count>` for a step's
 * request, `s<n>` for a payout sent again, `sweep` for the sweeper's), or a payment intent's collection attempt. Each
 * request gets its own chain of checks, so a retried transaction is checked again.
 */
export type CheckSubject = { transactionId: string; round: number; after: string } | { intentId: string; attempt: number; round: number };

export const providerJobs = {
  /** After DARAJA_STATUS_QUERY_AFTER_MS without a result, the provider is asked (STK Query, Transaction Status). */
  check: (subject: CheckSubject, delayMs: number): JobRequest<'provider.check'> => ({
    name: 'provider.check',
    id: 'transactionId' in subject
      ? jobId('provider.check', subject.transactionId, subject.after, String(subject.round))
      : jobId('provider.check', subject.intentId, String(subject.attempt), String(subject.round)),
    data: subject,
    delayMs,
  }),
  callback: (callbackId: string): JobRequest<'provider.callback'> => ({ name: 'provider.callback', id: jobId('provider.callback', callbackId), data: { callbackId } }),
  resend: (transactionId: string, send: number, delayMs: number): JobRequest<'payout.resend'> => ({
    name: 'payout.resend', id: jobId('payout.resend', transactionId, String(send)), data: { transactionId, send }, delayMs,
  }),
};

/** The callback's subject is not written yet (the request's own unit has not committed): the job tries again. */
export class ResultTooEarlyError extends AppError {
  constructor() {
    super('service_unavailable', 'The result arrived before its request was recorded; trying again shortly.');
  }
}

async function txBy(unit: Unit, where: string, value: string): Promise<TransactionRow | undefined> {
  const rows: TransactionRow[] = await unit.em.query(`SELECT ${TRANSACTION_COLUMNS} FROM transactions t WHERE t.environment = 'live' AND ${where} = $1 FOR NO KEY UPDATE`, [value]);
  return rows[0];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Finds the transaction or intent the result names and applies it; a result for nothing of ours is only recorded. */
export async function applyProviderResult(unit: Unit, config: Config, result: ProviderCallback): Promise<string> {
  const { outcome } = result;
  if (result.kind === 'collection') {
    const checkout = outcome.provider_reference;
    if (!checkout) return 'no reference';
    const tx = await txBy(unit, 't.provider_reference', checkout);
    if (tx) return settleCollection(unit, config, tx, { ...outcome, receipt: result.receipt ?? outcome.receipt });
    const intents: { id: string }[] = await unit.em.query(`SELECT id FROM payment_intents WHERE environment = 'live' AND provider_reference = $1`, [checkout]);
    if (intents[0]) return settleIntentCollection(unit, config, (await loadPaymentIntent(unit.em, intents[0].id, true))!, { ...outcome, receipt: result.receipt ?? outcome.receipt });
    throw new ResultTooEarlyError();
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
    `SELECT reference FROM provider_requests WHERE environment = 'live' AND kind = 'payout' AND outcome->>'queried' = $1`, [queryId],
  );
  return rows[0]?.reference;
}

/** awaiting_funds -> funded (delivery follows) or failed; a temporary answer waits for the next check. */
export async function settleCollection(unit: Unit, config: Config, tx: TransactionRow, outcome: ProviderOutcome): Promise<string> {
  // The result outran our own record of the request (its answer is still being applied): try again shortly.
  if (tx.status === 'created') throw new ResultTooEarlyError();
  if (tx.direction !== 'onramp' || tx.status !== 'awaiting_funds') return `unchanged (${tx.status})`;
  if (outcome.status === 'succeeded') {
    const funded = await moveTransaction(unit, tx, 'funded', { set: { receipt: outcome.receipt ?? null } });
    if (funded) await unit.stage(txJobs.deliver(funded.row, stepDelay(config, tx.environment)), scopeOf(tx));
    return 'funded';
  }
  if (outcome.status === 'declined' || outcome.status === 'rejected') {
    const failure = { code: outcome.failure?.code ?? 'collection_declined', message: outcome.failure?.message ?? 'The payer did not complete the payment.' };
    await moveTransaction(unit, tx, 'failed', { set: { failure }, reason: failure.code });
    return 'failed';
  }
  return outcome.status;
}

/** What a payout result says beyond its outcome (see ProviderCallback). */
type PayoutFacts = Pick<ProviderCallback, 'absent' | 'queryId' | 'timedOut' | 'receipt'>;

/**
 * processing -> completed, or failed with the refund (permanent). A result saying the request did not pay (M-Pesa's
 * own temporary result, a status "not found") sends it again after a backoff while PROVIDER_MAX_ATTEMPTS allows, then
 * action_required (retry sends again). A queue timeout says nothing: the status is asked at once.
 */
export async function settlePayout(unit: Unit, config: Config, tx: TransactionRow, outcome: ProviderOutcome, facts: PayoutFacts = {}): Promise<string> {
  if (tx.status === 'funded') throw new ResultTooEarlyError();
  if (tx.direction !== 'offramp') return `unchanged (${tx.status})`;
  if (facts.queryId && !(await latestQuery(unit, tx.id, facts.queryId))) return 'stale status result';
  if (facts.timedOut) {
    if (tx.status !== 'processing') return `unchanged (${tx.status})`;
    const [{ sends }] = await requestRow(unit, tx.id);
    await unit.stage(providerJobs.check({ transactionId: tx.id, round: 1, after: `t${sends}` }, 0), scopeOf(tx));
    return 'asking status';
  }
  if (facts.absent) return payoutAbsent(unit, config, tx, outcome, facts.queryId);
  if (tx.status !== 'processing') return `unchanged (${tx.status})`;
  const reference = outcome.provider_reference ?? tx.provider_reference;
  if (outcome.status === 'succeeded') {
    await keepFinal(unit, tx.id, outcome);
    await moveTransaction(unit, tx, 'completed', { set: { completed_at: NOW, provider_reference: reference, receipt: facts.receipt ?? outcome.receipt ?? null }, ledger: () => payoutEntry(tx) });
    return 'completed';
  }
  if (outcome.status === 'rejected' || outcome.status === 'declined') {
    await keepFinal(unit, tx.id, outcome);
    const refund = await refundOfframp(unit, chainFor(tx.environment, config), tx);
    const failure = { code: outcome.failure?.code ?? 'payout_rejected', message: outcome.failure?.message ?? 'M-Pesa refused the payout.' };
    await moveTransaction(unit, tx, 'failed', { set: { failure, refund, provider_reference: reference }, reason: failure.code });
    return 'failed';
  }
  return 'pending';
}

async function requestRow(unit: Unit, reference: string): Promise<{ sends: number; outcome: Record<string, unknown> }[]> {
  return unit.em.query(`SELECT sends, outcome FROM provider_requests WHERE environment = 'live' AND kind = 'payout' AND reference = $1 FOR UPDATE`, [reference]);
}

/** Whether a status result answers the latest status query about the payout (an older one may predate a send). */
async function latestQuery(unit: Unit, reference: string, queryId: string): Promise<boolean> {
  const [row] = await requestRow(unit, reference);
  return row?.outcome.queried === queryId;
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
        AND outcome->>'status' NOT IN ('succeeded', 'declined', 'rejected') AND ($3::text IS NULL OR outcome->>'queried' = $3) RETURNING sends`,
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

async function settleIntentCollection(unit: Unit, config: Config, intent: PaymentIntentRow, outcome: ProviderOutcome): Promise<string> {
  if (intent.status !== 'processing') return `unchanged (${intent.status})`;
  if (outcome.status === 'succeeded') {
    // Keyed by the CheckoutRequestID, whoever brings the news (callback or STK Query): one payment, one deposit.
    await recordPayment(unit, config, intent.id, mobileMoneyPayment(intent, outcome.provider_reference!, outcome.receipt), chainFor(intent.environment, config));
    return 'paid';
  }
  if (outcome.status === 'declined' || outcome.status === 'rejected') return collectionCameToNothing(unit, intent, collectionFailure(outcome), outcome.provider_reference);
  return outcome.status;
}

/** Checks before a request that never got its result is handed to the business (action_required). */
export const MAX_CHECK_ROUNDS = 5;

/** An accepted request (`pending`) waits for its callback; if none comes in time, the provider is asked. */
export async function awaitResult(unit: Unit, config: Config, subject: CheckSubject, outcome: ProviderOutcome, scope: { businessId: string; environment: 'sandbox' | 'live' }): Promise<void> {
  if (outcome.status === 'pending') await unit.stage(providerJobs.check(subject, config.daraja.statusQueryAfterMs), scope);
}
