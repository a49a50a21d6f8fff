// The one fiat provider interface (CONTRACT §12): collect, pay out, query status, parse callback. Shaped after
// M-Pesa Daraja: a request is accepted (`pending`) and its result arrives later by callback or status query.
import type { DataSource, EntityManager } from 'typeorm';
import type { Logger } from 'pino';
import { AppError } from '../errors.js';
import type { Config } from '../config.js';
import type { PaymentMethod, ProviderId } from '../domain/corridors.js';
import type { EventScope } from '../domain/events.js';
import type { PayoutAnswer } from '../kernel/payout-answers.js';

export type ProviderKind = 'collection' | 'payout';

/**
 * succeeded: money moved. pending: accepted, the result comes by callback or queryStatus. declined: the payer
 * refused or failed a collection. rejected: the provider refused a payout for good. temporary_failure: retry later.
 */
export type ProviderStatus = 'succeeded' | 'pending' | 'declined' | 'rejected' | 'temporary_failure';

export interface ProviderFailure {
  /** snake_case; becomes the transaction's `failure.code`. */
  code: string;
  /** Safe to show the business: never repeats a phone number, account number or credential. */
  message: string;
}

export interface ProviderOutcome {
  status: ProviderStatus;
  /** The provider's id for the request (Daraja CheckoutRequestID / ConversationID); null when it never accepted one. */
  provider_reference: string | null;
  /** The receipt of money that moved (M-Pesa's receipt; sandbox makes one up), when the answer carries it. */
  receipt?: string;
  failure?: ProviderFailure;
  /** The provider says the request ended without moving money, so a new request may be sent (MTN: under a new UUID). */
  ended?: boolean;
}

export interface CollectRequest {
  /** Our transaction or payment-intent id: the idempotency key the provider sees. */
  reference: string;
  scope: EventScope;
  currency: string;
  /** Decimal string at the currency's scale. */
  amount: string;
  phone_number: string;
  mobile_network: string;
}

export interface PayoutRequest {
  /** Our transaction id: the idempotency key the provider sees (Daraja OriginatorConversationID). */
  reference: string;
  scope: EventScope;
  currency: string;
  /** Decimal string at the currency's scale. */
  amount: string;
  payment_method: PaymentMethod;
  account_holder_name: string;
  /** The beneficiary's plaintext details (loadActiveBeneficiary): never log, store or enqueue them. */
  details: Record<string, string>;
  /**
   * An on-ramp's fiat refund (CONTRACT §18 "On-ramp refunds"): a request the provider refused for good is sent again as
   * a new request (the refusal is a final "not paid" about it). Any other payout's refusal stands (its USDC goes back).
   */
  resendRefused?: boolean;
}

/** A provider's asynchronous result, read from a callback body. */
export interface ProviderCallback {
  kind: ProviderKind;
  /** Our reference when the provider echoes it (B2C/B2B OriginatorConversationID); STK callbacks carry only theirs. */
  reference: string | null;
  /** Daraja's ConversationID of a payout result: B2B echoes no reference of ours, so it is matched by this. */
  conversationId?: string;
  /** The M-Pesa receipt (MpesaReceiptNumber, TransactionID) when money moved. */
  receipt?: string;
  /**
   * STK: the MerchantRequestID, the amount and who M-Pesa says paid (checked against the request): the payer's digests
   * under every key of ENCRYPTION_KEYS (payerKeys), taken when the callback arrived, since stored callbacks keep the
   * number only redacted. The request matches when its digest is one of them.
   */
  merchantRequestId?: string;
  amount?: string;
  payers?: string[];
  /**
   * A payout status answer (Transaction Status, MoMo's status GET): what it says of the request; `failed` is "not
   * paid" without its reason; null or absent: nothing final. A Result callback's word is its `outcome` (a claim).
   */
  answer?: PayoutAnswer | 'failed' | null;
  /** A status result: the id of our status query it answers (only answers to queries since the latest send count). */
  queryId?: string;
  /** The request timed out in the provider's queue: it may still run, so its status is asked at once. */
  timedOut?: boolean;
  /**
   * The provider's own callback about a request (STK result, payout result), not a query's answer: a success of a
   * collection or a payout's permanent failure is corroborated by a status query before money moves (CONTRACT §14).
   */
  claim?: boolean;
  outcome: ProviderOutcome;
}

/**
 * Every method is idempotent on (kind, reference): repeating a call never pays or charges twice, it answers what the
 * first accepted call did. Transport problems that retrying can fix throw ProviderError; refusals are outcomes.
 */
export interface PaymentProvider {
  readonly id: ProviderId | 'sandbox';
  /**
   * Its answers come from the database alone (the sandbox): given the caller's unit's manager as `db`, a request, its
   * record and the moves it causes commit together, or not at all. Absent where a request leaves for a real provider
   * (it is recorded, and sent, outside any transaction).
   */
  readonly answersInUnit?: boolean;
  collect(req: CollectRequest): Promise<ProviderOutcome>;
  payout(req: PayoutRequest): Promise<ProviderOutcome>;
  /**
   * The provider's current answer for a request we sent; null when it has no record of the reference (safe to send).
   * `providerReference` names which of its ids to ask about (a callback's CheckoutRequestID) when not the stored one.
   */
  queryStatus(kind: ProviderKind, reference: string, providerReference?: string): Promise<ProviderOutcome | null>;
  /** Reads a result callback; null when the body is not one of ours. Adapters without callbacks omit it. */
  parseCallback?(kind: ProviderKind, body: unknown): ProviderCallback | null;
}

/** A transport problem worth retrying (timeout, 5xx, no answer): service_unavailable, which workers retry with backoff. */
export class ProviderError extends AppError {
  constructor(
    message: string,
    /** The provider's own code when it gave one (Daraja `500.001.1001`, `1037`), for logs and the retry decision. */
    readonly providerCode?: string,
    retryAfterSeconds = 5,
  ) {
    super('service_unavailable', message, undefined, retryAfterSeconds);
    this.name = 'ProviderError';
  }
}

export type Queryable = Pick<DataSource | EntityManager, 'query'>;

export interface ProviderDeps {
  /** Where adapters record their requests (provider_requests). */
  db: Queryable;
  /** Live adapters read their credentials and base URL from here. */
  config?: Config;
  log?: Logger;
}

/** Succeeded, declined and rejected are final: a provider answers the same for that reference from then on. */
export function isFinalOutcome(outcome: ProviderOutcome): boolean {
  return outcome.status === 'succeeded' || outcome.status === 'declined' || outcome.status === 'rejected';
}

/**
 * The provider reference of a collection found paid by a reconciliation listing (M-Pesa's Pull Transactions), which
 * names the payment by its receipt alone: how the prompt's request records it and how a late callback finds it.
 */
export function pulledReference(receipt: string): string {
  return `pull-${receipt}`;
}
