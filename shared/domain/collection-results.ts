// A live collection's result (an STK callback, an STK Query answer) applied to what it pays: an on-ramp, or a payment
// intent's collection attempt, named by the collection request's reference (`<transaction id>` or
// `<intent id>-<attempt>`). A success is credited whenever it comes (CONTRACT §14): after its prompt ended unpaid
// it still funds the on-ramp, or lands as a late treasury deposit of the intent.
import type { Config } from '../config.js';
import { updateReturning, type Unit } from '../db/unit-of-work.js';
import { chainFor } from '../chain/sandbox-chain.js';
import { pulledReference, type ProviderCallback, type ProviderOutcome, type Queryable } from '../providers/provider.js';
import { AppError } from '../errors.js';
import { logger } from '../logger.js';
import { stepDelay, txJobs } from './lifecycle-jobs.js';
import { sameAmount } from './money.js';
import { collectionCameToNothing, collectionFailure, loadPaymentIntent } from './payment-intents.js';
import { mobileMoneyPayment, recordPayment } from './treasury-deposits.js';
import { lockTransaction, scopeOf, type TransactionRow } from './transactions.js';
import { decideOnrampIn } from './onramp-moves.js';
import { decideSuccess } from '../kernel/provider-records.js';
import { settleRequest } from '../providers/provider-requests.js';

/** A live collection request as provider_requests keeps it: our reference, the amount, a digest of the payer's MSISDN. */
export interface CollectionRequest {
  reference: string;
  amount: string;
  payer: string | null;
}

const COLUMNS = `reference, request->>'amount' AS amount, request->>'payer' AS payer`;

/**
 * The collection request a result is about: by our reference (a query's answer), else by its CheckoutRequestID. A
 * success callback naming a CheckoutRequestID we never stored belongs to a prompt whose STK Push answer was lost (timed
 * out, a 5xx): it is matched by payer and amount to the one request still waiting for its answer, which learns its
 * CheckoutRequestID here (a retry then asks STK Query instead of prompting again). Undefined: not recorded (yet).
 */
export async function collectionRequestFor(q: Queryable, result: ProviderCallback): Promise<CollectionRequest | undefined> {
  // A prompt Pull Transactions found paid knows its payment by receipt only: the callback that still comes names it too.
  const rows: CollectionRequest[] = result.reference
    ? await q.query(`SELECT ${COLUMNS} FROM provider_requests WHERE environment = 'live' AND kind = 'collection' AND reference = $1`, [result.reference])
    : await q.query(`SELECT ${COLUMNS} FROM provider_requests WHERE environment = 'live' AND kind = 'collection' AND provider_reference IN ($1, $2)`,
      [result.outcome.provider_reference, result.receipt ? pulledReference(result.receipt) : null]);
  if (rows[0] || result.reference || !result.claim || result.outcome.status !== 'succeeded') return rows[0];
  const payers = result.payers ?? [];
  if (!payers.length || !result.amount || !result.outcome.provider_reference) return undefined;
  const candidates: (CollectionRequest & { id: string; recent: boolean })[] = await q.query(
    `SELECT id, ${COLUMNS}, updated_at > now() - interval '${PROMPT_WINDOW_MINUTES} minutes' AS recent FROM provider_requests
      WHERE environment = 'live' AND kind = 'collection' AND status = 'sending'
        AND provider_reference IS NULL AND request->>'payer' = ANY($1::text[]) AND (request->>'amount')::numeric = $2::numeric AND updated_at > now() - interval '1 day'`,
    [payers, result.amount],
  );
  // A payer pays a prompt within its minute or two on the phone, and its callback follows: among several unnamed prompts
  // of that amount to that phone, the one sent in the last minutes is the one paid. Two of those, both unanswered:
  // which one this pays cannot be told, and the callback is kept for an operator.
  const recent = candidates.filter((c) => c.recent);
  const waiting = candidates.length === 1 ? candidates : recent;
  if (waiting.length !== 1) return undefined;
  const learned = await updateReturning<CollectionRequest>(q,
    `UPDATE provider_requests SET provider_reference = $2, updated_at = now() WHERE id = $1 AND provider_reference IS NULL RETURNING ${COLUMNS}`,
    [waiting[0].id, result.outcome.provider_reference],
  );
  return learned[0];
}

/** What of an STK success does not match its request (amount, phone), or null when both do. */
export function requestMismatch(request: CollectionRequest, result: ProviderCallback): 'amount' | 'phone' | null {
  if (!result.amount || !sameAmount(result.amount, request.amount, 2)) return 'amount';
  if (request.payer && !(result.payers ?? []).includes(request.payer)) return 'phone';
  return null;
}

/** How long before its success callback an unnamed prompt counts as the one it answers (an STK prompt lives about a minute). */
const PROMPT_WINDOW_MINUTES = 10;

const INTENT_REFERENCE = /^([0-9a-f-]{36})-(\d+)$/;

/**
 * Where a payment with this M-Pesa (or MoMo) receipt is already credited: an intent's deposit or an on-ramp. One
 * payment is reported under two names (its callback and STK Query by CheckoutRequestID, Pull Transactions by receipt
 * alone), so the receipt decides whether it is new (fault seed 12000 credited one payment twice). Unique indexes on
 * the live receipts are the database's guarantee when two reports race.
 */
async function receiptCredited(unit: Unit, receipt: string): Promise<string | undefined> {
  const rows: { what: string }[] = await unit.em.query(
    `SELECT 'deposit ' || id AS what FROM treasury_deposits WHERE environment = 'live' AND payment_method = 'mobile_money' AND receipt = $1
     UNION ALL SELECT 'on-ramp ' || id FROM transactions WHERE environment = 'live' AND direction = 'onramp' AND receipt = $1 LIMIT 1`,
    [receipt],
  );
  return rows[0]?.what;
}

/** Applies a collection's (corroborated) result to the on-ramp or intent attempt its request names. */
export async function applyCollection(unit: Unit, config: Config, reference: string, outcome: ProviderOutcome): Promise<string> {
  // Kept with its request in the unit that credits it: a success recorded but never applied would be asked about
  // under a name M-Pesa does not know (`pull-<receipt>`) for ever (issue 36 defect 8).
  if (outcome.status === 'succeeded') await settleRequest(unit.em, { environment: 'live', kind: 'collection', reference }, (r) => decideSuccess(r, outcome), true);
  const credited = outcome.status === 'succeeded' && outcome.receipt ? await receiptCredited(unit, outcome.receipt) : undefined;
  if (credited) return `unchanged (already credited: ${credited})`;
  const intent = INTENT_REFERENCE.exec(reference);
  if (intent) return settleIntentCollection(unit, config, intent[1], Number(intent[2]), outcome);
  const tx = await lockTransaction(unit, reference);
  return tx ? settleCollection(unit, config, tx, outcome) : 'not ours';
}

/** The callback's subject is not written yet (the request's own unit has not committed): the job tries again. */
export class ResultTooEarlyError extends AppError {
  constructor() {
    super('service_unavailable', 'The result arrived before its request was recorded; trying again shortly.');
  }
}

/**
 * awaiting_funds -> funded (delivery follows) or failed (the prompt ended unpaid), as shared/kernel/onramp-steps.ts
 * decides; `pending` waits for the next check.
 */
export async function settleCollection(unit: Unit, config: Config, tx: TransactionRow, outcome: ProviderOutcome): Promise<string> {
  if (tx.status === 'created') throw new ResultTooEarlyError();
  if (tx.direction !== 'onramp') return `unchanged (${tx.status})`;
  if (outcome.status === 'succeeded') return fundCollection(unit, config, tx, outcome);
  if (outcome.status === 'declined' || outcome.status === 'rejected') {
    const failure = { code: outcome.failure?.code ?? 'collection_declined', message: outcome.failure?.message ?? 'The payer did not complete the payment.' };
    return decideOnrampIn(unit, tx.id, { kind: 'collection_unpaid', failure });
  }
  return tx.status === 'awaiting_funds' ? outcome.status : `unchanged (${tx.status})`;
}

/**
 * The payer paid: funded and delivered, from awaiting_funds, from action_required while the collection was stalled,
 * or from failed on a prompt that ended unpaid (never once refunded). Already funded: its receipt kept. `tx` is the
 * row applyCollection locked.
 */
async function fundCollection(unit: Unit, config: Config, tx: TransactionRow, outcome: ProviderOutcome): Promise<string> {
  const paid = { kind: 'collection_paid' as const, receipt: outcome.receipt ?? null, providerReference: outcome.provider_reference, deliver: txJobs.deliver(tx, stepDelay(config, tx.environment)) };
  const decided = await decideOnrampIn(unit, tx.id, paid);
  // A stalled collection resumed waiting: the same success now funds it.
  const funded = decided === 'resumed' ? await decideOnrampIn(unit, tx.id, paid) : decided;
  // Nothing moved: `tx` is the row as locked (a failed one that was refunded, or whose failure was no unpaid prompt, stays so).
  if (!funded.startsWith('unchanged') || tx.status === 'failed') return funded;
  if (outcome.receipt) await unit.em.query(`UPDATE transactions SET receipt = $2 WHERE id = $1 AND receipt IS NULL AND provider_reference = $3`, [tx.id, outcome.receipt, outcome.provider_reference]);
  // A second prompt the payer also approved: the money is M-Pesa's record, for an operator to return.
  if (tx.status !== 'funded' || tx.provider_reference !== outcome.provider_reference) {
    logger().warn({ transactionId: tx.id, status: tx.status }, 'a collection success for an on-ramp already past its collection');
  }
  return funded;
}

/**
 * A success is a treasury deposit, whatever the intent's status: late (flagged, the intent unchanged) when the intent
 * is no longer waiting on this attempt. A refusal lets the intent wait again, only for its current attempt.
 */
async function settleIntentCollection(unit: Unit, config: Config, intentId: string, attempt: number, outcome: ProviderOutcome): Promise<string> {
  const intent = await loadPaymentIntent(unit.em, intentId, true);
  if (!intent) return 'not ours';
  const current = intent.status === 'processing' && intent.collection_attempts === attempt;
  if (outcome.status === 'succeeded') {
    // Keyed by the CheckoutRequestID, whoever brings the news (callback or STK Query): one payment, one deposit.
    const { deposit } = await recordPayment(unit, config, intent.id, mobileMoneyPayment(intent, outcome.provider_reference!, outcome.receipt), chainFor(intent.environment, config), { late: !current });
    return deposit.late_payment ? 'paid (late)' : 'paid';
  }
  if (!current) return `unchanged (${intent.status})`;
  if (outcome.status === 'declined' || outcome.status === 'rejected') return collectionCameToNothing(unit, intent, collectionFailure(outcome), outcome.provider_reference);
  return outcome.status;
}
