// Whether a live provider request may leave again (CONTRACT §13, §17, §18): answered by what is stored of it, asked
// about first, sent, or waited for. Pure: the live adapters learn the step through their record keeper
// (shared/providers/provider-requests.ts, claimStep) and only carry it out; they decide nothing about re-sending.
import { finalAnswerOf, type PayoutAnswer } from './payout-answers.js';
import { isFinalStatus, type StoredOutcome } from './provider-records.js';

/** What is stored of the request when it is claimed again (null: never claimed before, this is the first time). */
export type StoredRequest = StoredOutcome & { sends: number; answer: PayoutAnswer | null };

/** What the provider lets us do with a request. */
export interface ProviderCapabilities {
  /**
   * We name each request (MTN's X-Reference-Id) before it leaves, and the provider refuses a second request under that
   * name (409): sent again under the same name it never runs twice, so only an ended request needs a new one. False
   * (Daraja): the provider names the request once it takes it, so a request that may be live is never sent again.
   */
  namesRequests: boolean;
}

export interface StepOptions {
  /** A payout refused for good may go again as a new request (an on-ramp's fiat refund, CONTRACT §18). */
  resendRefused: boolean;
  provider: ProviderCapabilities;
}

/** The request leaves (`newId`: under a name of its own, the earlier one ended; `overRefusal`: over a refusal for good). */
export type SendStep = { kind: 'send'; newId: boolean; overRefusal: boolean };
/** Nothing leaves: a prompt that may be live on the payer's phone is waited for (its callback, STK Query). */
export type WaitStep = { kind: 'wait' };

export type RequestStep =
  /** The stored answer stands: nothing leaves. */
  | { kind: 'answer'; outcome: StoredOutcome }
  /**
   * The earlier request may be live: the provider is asked about it (`providerReference` when named) first. What it
   * knows is stored and answered, unless it says the request `ended` and `ended` is given; it knows nothing: `absent`.
   */
  | { kind: 'ask'; providerReference: string | null; absent: SendStep | WaitStep; ended: SendStep | null }
  | SendStep
  | WaitStep;

const send = (newId: boolean, overRefusal: boolean): SendStep => ({ kind: 'send', newId, overRefusal });

/** What a stored payout has finally said (null: nothing final, it may still pay). */
function answerOf(stored: StoredRequest): PayoutAnswer | null {
  return finalAnswerOf({ environment: 'live', status: stored.status, answer: stored.answer });
}

/**
 * The next step for a claimed request. Payouts: one paid, or refused for good (unless `resendRefused`), is answered;
 * one with no final answer is asked about first (a Result callback alone never sends a payout again: only a status
 * answer saying it did not pay or does not exist, stored as its answer, does); failed for now or absent goes again.
 * Collections: a payer is never prompted twice (a prompt that left unanswered is asked about or waited for).
 */
export function decideRequestStep(kind: 'collection' | 'payout', stored: StoredRequest | null, options: StepOptions): RequestStep {
  return options.provider.namesRequests ? namedStep(kind, stored, options.resendRefused) : unnamedStep(kind, stored, options.resendRefused);
}

/** Daraja: the provider names the request (ConversationID, CheckoutRequestID) once it takes it. */
function unnamedStep(kind: 'collection' | 'payout', stored: StoredRequest | null, resendRefused: boolean): RequestStep {
  if (kind === 'payout') {
    if (!stored) return send(false, resendRefused);
    const answered = answerOf(stored);
    if (answered === 'paid' || (answered === 'failed_permanent' && !resendRefused)) return { kind: 'answer', outcome: stored };
    // The earlier request may be live (a crash, a timeout, a 5xx, a queue timeout, accepted and unanswered, a Result
    // alone): Transaction Status decides (its result arrives as a callback).
    if (!answered) return { kind: 'ask', providerReference: stored.provider_reference, absent: send(false, resendRefused), ended: null };
    return send(false, resendRefused);
  }
  if (!stored) return send(false, false);
  // A prompt Daraja took (pending) or answered is never sent twice; only a temporary refusal or one never sent goes.
  if (stored.status !== 'temporary_failure' && stored.status !== 'sending') return { kind: 'answer', outcome: stored };
  // One that left and was never answered may be live on the payer's phone: waited for, never prompted again.
  const otherwise = stored.status === 'sending' && stored.sends > 0 ? { kind: 'wait' as const } : send(false, false);
  if (stored.provider_reference) return { kind: 'ask', providerReference: stored.provider_reference, absent: otherwise, ended: null };
  return otherwise;
}

/** MTN MoMo: we name the request (X-Reference-Id); MTN refuses a second request under the same name. */
function namedStep(kind: 'collection' | 'payout', stored: StoredRequest | null, resendRefused: boolean): RequestStep {
  if (!stored) return send(false, false);
  // A payout MTN answered "not paid, for now" goes again under a new name; one refused for good only over a refusal
  // (an on-ramp's fiat refund). A collection's answer is final: its payer is asked again only by a new collection.
  const answered = kind === 'payout' ? answerOf(stored) : null;
  const overRefusal = answered === 'failed_permanent' && resendRefused;
  const ended = answered === 'failed_temporary' || overRefusal;
  if (ended) return send(true, overRefusal);
  if (stored.status !== 'sending' && isFinalStatus(stored.status)) return { kind: 'answer', outcome: stored };
  // The earlier request may have reached MTN (a crash, a timeout, a 5xx): its status decides; unknown to MTN, it goes
  // again under the same name (a late arrival answers 409), ended, under a new one.
  if (stored.provider_reference) return { kind: 'ask', providerReference: stored.provider_reference, absent: send(false, false), ended: send(true, false) };
  return send(false, false);
}
