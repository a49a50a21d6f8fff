// What a Daraja ResultCode (or synchronous errorCode) means for us (CONTRACT §13): 0 is success; our own balance
// short, a busy system or a timeout are temporary; a refused receiver or a refused prompt is final. An STK prompt's
// result is §18's instead (shared/kernel/stk-results.ts): every non-zero code ends it.
import type { ProviderKind, ProviderOutcome } from '../provider.js';
import { stkResult } from '../../kernel/stk-results.js';

// Our side short of float (1), the subscriber busy (1001), the prompt or system timed out (1037), throttled (17, 26),
// and the gateway's "being processed" (500.001.1001).
const TEMPORARY = new Set(['1', '17', '26', '1001', '1037', '500.001.1001']);
// Receivers M-Pesa cannot pay: unregistered or invalid number, account or shortcode.
const INVALID_RECEIVER = new Set(['2040', '8006', 'C2B00011', 'C2B00012', 'R000002', '2028']);

/** Digits that could be a phone or account number never leave in a message. */
export function safeDescription(desc: unknown): string {
  const text = typeof desc === 'string' ? desc : '';
  return text.replace(/\d{6,}/g, '[redacted]').slice(0, 200);
}

/**
 * An STK prompt's ResultCode (its callback, STK Query) as an outcome: paid, or ended unpaid with the code §18 names;
 * never temporary, so no prompt waits for ever.
 */
export function stkOutcome(code: string, desc: unknown, checkoutRequestId: string | null): ProviderOutcome {
  const verdict = stkResult(code, safeDescription(desc));
  if (verdict.paid) return { status: 'succeeded', provider_reference: checkoutRequestId };
  return { status: 'declined', provider_reference: checkoutRequestId, failure: { code: verdict.code, message: verdict.message } };
}

/** A payout's ResultCode (result callback) or a request's errorCode (a refused STK Push, B2C, B2B) as an outcome for `kind`. */
export function outcomeOf(kind: ProviderKind, code: string, desc: unknown, providerReference: string | null): ProviderOutcome {
  if (code === '0') return { status: 'succeeded', provider_reference: providerReference };
  const said = safeDescription(desc);
  // Throttled (HTTP 429, Daraja's 429.x codes): refused for now, never a verdict on the payee.
  if (TEMPORARY.has(code) || /^(http_)?429/.test(code)) {
    return { status: 'temporary_failure', provider_reference: providerReference, failure: { code: 'provider_unavailable', message: `M-Pesa is temporarily unable to process this (code ${code}): ${said}` } };
  }
  if (kind === 'collection') {
    return { status: 'declined', provider_reference: providerReference, failure: { code: 'collection_declined', message: `M-Pesa did not collect the payment (code ${code}): ${said}` } };
  }
  const invalid = INVALID_RECEIVER.has(code);
  return {
    status: 'rejected', provider_reference: providerReference,
    failure: { code: invalid ? 'invalid_receiver' : 'payout_rejected', message: `M-Pesa refused the payout (code ${code}): ${said}${invalid ? ' Check the beneficiary\'s details.' : ''}` },
  };
}
