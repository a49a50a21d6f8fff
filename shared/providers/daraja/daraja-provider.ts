// The live fiat provider: M-Pesa Daraja (CONTRACT §12, §13). Every request is first written to provider_requests as
// `sending`, then sent, then its answer stored; a job that finds its reference already `sending` (it died between
// the two writes) or temporarily refused asks Daraja whether the first request went through before sending again.
import type { Logger } from 'pino';
import { AppError } from '../../errors.js';
import { corridorError } from '../../domain/corridors.js';
import { logger } from '../../logger.js';
import { getConfig } from '../../config.js';
import type { MasterKey } from '../../crypto/envelope.js';
import { sameAmount, toMinor } from '../../domain/money.js';
import { ProviderError, pulledReference, type CollectRequest, type PaymentProvider, type PayoutRequest, type ProviderCallback, type ProviderDeps, type ProviderKind, type ProviderOutcome, type Queryable } from '../provider.js';
import { DarajaClient, darajaTimestamp, type DarajaAnswer } from './daraja-client.js';
import { outcomeOf, safeDescription, stkOutcome } from './result-codes.js';
import { parseDarajaCallback } from './callbacks.js';
import { msisdn, payerKey } from './msisdn.js';
import { ProviderRequests, type AnswerFacts, type ProviderCapabilities } from '../provider-requests.js';
import type { PayoutAnswer } from '../../kernel/payout-answers.js';

type Stored = ProviderOutcome | { status: 'sending'; provider_reference: string | null };

/** Daraja names a request (ConversationID, CheckoutRequestID) only once it takes it: one that may be live never goes again. */
const DARAJA: ProviderCapabilities = { namesRequests: false };

/** Daraja takes whole shillings: the quote rounds live KES to whole units, so anything else is our bug. */
function wholeKes(currency: string, amount: string): number {
  if (currency !== 'KES') throw corridorError('unsupported_corridor', `M-Pesa serves KES only, not ${currency}.`, { reason: 'no_live_provider' });
  const cents = toMinor(amount, 2);
  if (cents <= 0n || cents % 100n !== 0n) throw AppError.invalid(`M-Pesa takes whole shillings; ${amount} KES is not.`);
  return Number(cents / 100n);
}

/**
 * A 5xx that is not Daraja's "being processed" (500.001.1001, temporary and not sent): the gateway failed with or
 * after the request, so whether it went out is unknown.
 */
function unanswered(answer: DarajaAnswer): boolean {
  return answer.status >= 500 && String(answer.body?.errorCode ?? '') !== '500.001.1001';
}

/**
 * A prompt's AccountReference (12 characters at most), which Pull Transactions lists as `billreference`: an on-ramp's
 * id without its dashes; a payment intent's attempt (`<intent id>-<n>`) ends in its number, so two prompts of one
 * intent never share one (fault seed 12000: a payment to the second prompt was found again for the first).
 */
export function accountReference(reference: string): string {
  const attempt = /^([0-9a-f-]{36})-(\d+)$/.exec(reference);
  if (!attempt) return reference.replace(/-/g, '').slice(0, 12);
  return attempt[1].replace(/-/g, '').slice(0, 12 - attempt[2].length) + attempt[2];
}

/** Pull Transactions pages: 100 rows each; a prompt's window is minutes, so a few pages are plenty. */
const PULL_PAGES = 5;
/** A payment M-Pesa stamped a little before our record of the prompt (clocks differ) still belongs to it. */
const PULL_SKEW_MS = 60_000;

/** A request M-Pesa refused outright (HTTP 4xx with its errorCode) never ran: that refusal is its final answer. */
function refusedRequest(answer: DarajaAnswer, outcome: ProviderOutcome): PayoutAnswer | null {
  if (answer.status >= 500 || outcome.status === 'pending' || outcome.status === 'succeeded') return null;
  return outcome.status === 'temporary_failure' ? 'failed_temporary' : 'failed_permanent';
}

/** An answer to a request: accepted (ResponseCode 0) is pending; Daraja's errorCode is read like a ResultCode. */
function answerOutcome(kind: ProviderKind, answer: DarajaAnswer, reference: string | null): ProviderOutcome {
  const body = answer.body ?? {};
  if (String(body.ResponseCode ?? '') === '0') return { status: 'pending', provider_reference: reference };
  const code = String(body.errorCode ?? body.ResponseCode ?? `http_${answer.status}`);
  return outcomeOf(kind, code, body.errorMessage ?? body.ResponseDescription, reference);
}

export class DarajaProvider implements PaymentProvider {
  readonly id = 'mpesa_daraja' as const;
  private readonly db: Queryable;
  private readonly log: Logger;
  private readonly requests: ProviderRequests;
  /** Payer digests are keyed under ENCRYPTION_KEYS (msisdn.ts). */
  private readonly keys: readonly MasterKey[];

  constructor(deps: ProviderDeps, private readonly client: DarajaClient) {
    this.db = deps.db;
    this.keys = (deps.config ?? getConfig()).encryptionKeys;
    this.log = deps.log ?? logger();
    this.requests = new ProviderRequests(this.db, this.log, this.id);
  }

  async collect(req: CollectRequest): Promise<ProviderOutcome> {
    const amount = wholeKes(req.currency, req.amount);
    const phone = msisdn(req.phone_number);
    const claimed = await this.requests.claimStep('collection', req, { currency: req.currency, amount: req.amount, payment_method: 'mobile_money', payer: payerKey(this.keys, phone)! }, DARAJA);
    // The kernel decides (request-steps.ts): a prompt Daraja took is never sent twice. One whose answer was lost learns
    // its CheckoutRequestID from its callback (matched by payer and amount, collection-results.ts) and is then asked
    // about; one that left and was never answered may be live on the payer's phone: waited for, never prompted again.
    let step = claimed.step;
    if (step.kind === 'answer') return step.outcome as ProviderOutcome;
    if (step.kind === 'ask') {
      const known = await this.queryStatus('collection', req.reference);
      if (known) return this.store('collection', req.reference, known);
      step = step.absent;
    }
    if (step.kind === 'wait') return this.mayBeLive(req.reference);
    // A token first: without one nothing can leave, and a prompt marked sending is never sent again.
    await this.client.token();
    const timestamp = darajaTimestamp();
    // Two runs of one job (a stalled lock) both past the claim: only the first to mark it sending prompts the payer.
    if (!(await this.requests.markSending('collection', req.reference, undefined, claimed.sends))) return this.mayBeLive(req.reference);
    const answer = await this.client.stkPush({
      BusinessShortCode: this.client.shortcode, Password: this.client.stkPassword(timestamp), Timestamp: timestamp, TransactionType: 'CustomerPayBillOnline',
      Amount: amount, PartyA: phone, PartyB: this.client.shortcode, PhoneNumber: phone, CallBackURL: this.client.callbackUrl('stk'),
      AccountReference: accountReference(req.reference), TransactionDesc: 'Rampway',
    }).catch((err: unknown) => {
      // No answer (a timeout, a dropped connection, a bare 5xx): the prompt may have gone out. Only a token we could
      // not get means nothing left.
      if (err instanceof ProviderError && err.providerCode !== 'oauth') return null;
      throw err;
    });
    if (!answer || unanswered(answer)) return this.mayBeLive(req.reference);
    const checkout = typeof answer.body?.CheckoutRequestID === 'string' ? answer.body.CheckoutRequestID : null;
    return this.store('collection', req.reference, answerOutcome('collection', answer, checkout));
  }

  /**
   * A prompt that left without an answer we can read (CONTRACT §13: HTTP 5xx or no answer is temporary, never a
   * decline): pending, its request kept `sending`, so its callback teaches us its CheckoutRequestID and the status
   * checks then ask STK Query. A success the payer approves meanwhile funds it; it is never prompted a second time.
   */
  private async mayBeLive(reference: string): Promise<ProviderOutcome> {
    const known = await this.stored('collection', reference);
    this.log.info({ provider: this.id, kind: 'collection', reference }, 'provider answer unknown: waiting for the prompt\'s result');
    return { status: 'pending', provider_reference: known?.provider_reference ?? null };
  }

  async payout(req: PayoutRequest): Promise<ProviderOutcome> {
    const amount = wholeKes(req.currency, req.amount);
    const body = this.payoutBody(req, amount);
    const claimed = await this.requests.claimStep('payout', req, { currency: req.currency, amount: req.amount, payment_method: req.payment_method }, DARAJA);
    let step = claimed.step;
    if (step.kind === 'answer') return step.outcome as ProviderOutcome;
    if (step.kind === 'ask') {
      // The earlier request may be live: it is sent again only once Transaction Status says it did not pay (its result
      // arrives as a callback).
      const known = await this.queryStatus('payout', req.reference);
      if (known) return this.store('payout', req.reference, known);
      step = step.absent;
    }
    if (step.kind !== 'send') throw new AppError('internal_error', 'A payout is never waited for: it is answered, asked about or sent.');
    // Only if no other worker sent it since the claim read it (two jobs of one refund at once never both send).
    const instead = await this.requests.leaveOrAnswer('payout', req.reference, claimed.sends, undefined, step.overRefusal);
    if (instead) return instead;
    const answer = req.payment_method === 'mobile_money' ? await this.client.b2c(body) : await this.client.b2b(body);
    // Never a refusal: the payout may have run. The job's next attempt asks Transaction Status before sending again.
    if (unanswered(answer)) throw new ProviderError(`M-Pesa answered HTTP ${answer.status} (${safeDescription(answer.body?.errorCode)}).`, String(answer.status));
    const conversation = typeof answer.body?.ConversationID === 'string' ? answer.body.ConversationID : null;
    const outcome = answerOutcome('payout', answer, conversation);
    return this.store('payout', req.reference, outcome, { answer: refusedRequest(answer, outcome), conversationId: outcome.status === 'pending' ? conversation : null });
  }

  /**
   * Collections: STK Query answers at once (about `providerReference` when given: the CheckoutRequestID a callback
   * named). Payouts: Transaction Status only acknowledges (its result comes to the
   * `status` callback), so an accepted query is `pending`; a reference M-Pesa does not know is null (safe to send).
   */
  async queryStatus(kind: ProviderKind, reference: string, providerReference?: string): Promise<ProviderOutcome | null> {
    const request = await this.requests.storedWithSends(kind, reference);
    const stored = request?.outcome;
    if (kind === 'collection') {
      const checkout = providerReference ?? stored?.provider_reference;
      if (!checkout) return this.pulled(reference);
      const answer = await this.client.stkQuery(checkout);
      const body = answer.body ?? {};
      if (body.ResultCode !== undefined) return stkOutcome(String(body.ResultCode), body.ResultDesc, checkout);
      if (String(body.errorCode ?? '') === '500.001.1001') return { status: 'pending', provider_reference: checkout };
      throw new AppError('service_unavailable', `M-Pesa's STK Query gave no result (${safeDescription(body.errorCode ?? `HTTP ${answer.status}`)}).`);
    }
    const answer = await this.client.transactionStatus(reference);
    const body = answer.body ?? {};
    const queried = typeof body.OriginatorConversationID === 'string' ? body.OriginatorConversationID : null;
    // A refused query says nothing about the payout: only its result (not found, Completed) does.
    if (String(body.ResponseCode ?? '') !== '0' || !queried) {
      throw new AppError('service_unavailable', `M-Pesa's Transaction Status did not answer (${safeDescription(body.errorCode ?? `HTTP ${answer.status}`)}).`);
    }
    // Only the answers of queries asked since the request last left are about it: a query asked about an earlier
    // request, whose answer came back after the next request left, is not recorded against the next one.
    await this.db.query(
      `UPDATE provider_requests SET status_queries = status_queries || $3::text, updated_at = now()
        WHERE environment = 'live' AND kind = $1 AND reference = $2 AND sends = $4 AND status NOT IN ('succeeded', 'declined', 'rejected')`,
      [kind, reference, queried, request?.sends ?? 0],
    );
    return { status: 'pending', provider_reference: stored?.provider_reference ?? null };
  }

  /**
   * A prompt that left but that M-Pesa never named to us (its STK Push answer and its callback both lost): nothing to
   * ask STK Query about, so M-Pesa's reconciliation API (Pull Transactions) is asked what the shortcode collected since
   * the prompt left. A payment with its AccountReference and amount is its success, with the M-Pesa receipt as its
   * reference (`pull-<receipt>`), recorded where it is credited; a callback that still comes is matched to it by that receipt, and the payment,
   * credited once by receipt, is not credited twice. None there: still unknown (null). A refused or failed query:
   * unknown too, asked again on the next check.
   */
  private async pulled(reference: string): Promise<ProviderOutcome | null> {
    const [row]: { created_at: Date; amount: string; sends: number }[] = await this.db.query(
      `SELECT created_at, request->>'amount' AS amount, sends FROM provider_requests WHERE environment = 'live' AND kind = 'collection' AND reference = $1`,
      [reference]);
    if (!row || row.sends === 0) return null; // never left: M-Pesa has nothing for it
    const account = accountReference(reference);
    const since = row.created_at.getTime() - PULL_SKEW_MS;
    for (let page = 0; page < PULL_PAGES; page++) {
      const answer = await this.client.pullTransactions(new Date(since), new Date(), page * 100);
      const body = answer.body ?? {};
      if (String(body.ResponseCode ?? '') === '1001') return null;
      if (String(body.ResponseCode ?? '') !== '1000') {
        throw new AppError('service_unavailable', `M-Pesa's Pull Transactions gave no list (${safeDescription(body.errorCode ?? body.ResponseCode ?? `HTTP ${answer.status}`)}).`);
      }
      const rows = ([] as Record<string, unknown>[]).concat(...((body.Response ?? body.Transaction ?? []) as Record<string, unknown>[][]));
      const paid = rows.find((t) => String(t.billreference ?? '') === account && sameAmount(String(t.amount ?? ''), row.amount, 2) && typeof t.transactionId === 'string'
        && Date.parse(String(t.trxDate)) >= since);
      if (paid) {
        const receipt = String(paid.transactionId);
        this.log.warn({ provider: this.id, kind: 'collection', reference, receipt }, 'a prompt M-Pesa never named to us was found paid by Pull Transactions');
        // Not stored here: the unit that credits it records it (collection-results.ts), so a failed unit finds it again.
        return { status: 'succeeded', provider_reference: pulledReference(receipt), receipt };
      }
      if (rows.length < 100) return null;
    }
    return null;
  }

  parseCallback(kind: ProviderKind, body: unknown): ProviderCallback | null {
    return parseDarajaCallback(kind, body);
  }

  private payoutBody(req: PayoutRequest, amount: number): Record<string, unknown> {
    const common = { Amount: amount, Remarks: 'Rampway payout', ResultURL: this.client.callbackUrl('result'), QueueTimeOutURL: this.client.callbackUrl('timeout') };
    if (req.payment_method === 'mobile_money') {
      return { ...common, OriginatorConversationID: req.reference, CommandID: 'BusinessPayment', PartyB: msisdn(req.details.phone_number ?? ''), Occasion: req.reference };
    }
    const till = req.payment_method === 'buy_goods';
    const party = till ? req.details.till_number : req.details.paybill_number;
    if (!party || (!till && !req.details.account_number)) {
      throw new AppError('requirements_not_met', 'The payout details name no M-Pesa business to pay.', [{ path: 'details', message: till ? 'till_number is required' : 'paybill_number and account_number are required' }]);
    }
    return {
      ...common, OriginatorConversationID: req.reference, CommandID: till ? 'BusinessBuyGoods' : 'BusinessPayBill', RecieverIdentifierType: till ? '2' : '4',
      PartyB: party, AccountReference: till ? req.reference.slice(0, 12) : req.details.account_number, Requester: '', Occassion: req.reference,
    };
  }

  /**
   * The request leaves now: whatever was known of an earlier one (its answer, its queries) no longer describes it, so
   * if this one goes unanswered (timeout, 5xx) the next attempt asks first. `sends` counts requests that left.
   */
  private stored(kind: ProviderKind, reference: string): Promise<Stored | null> {
    return this.requests.stored(kind, reference);
  }

  private store(kind: ProviderKind, reference: string, outcome: ProviderOutcome, facts?: AnswerFacts): Promise<ProviderOutcome> {
    return this.requests.store(kind, reference, outcome, facts);
  }
}
