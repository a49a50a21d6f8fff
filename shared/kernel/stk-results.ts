// What an STK prompt's ResultCode (its callback, or STK Query) means for the money it was asking for (CONTRACT §18):
// 0 is paid; every other code ends the prompt unpaid, and the payer is prompted again only by a new collection.
// Section 13's temporary codes (1, 1037, a busy system) are about payouts only. Pure: no I/O, no provider types.

/** Why an STK prompt ended unpaid, as `failure.code` (on-ramp) or `last_payment_error.code` (payment intent). */
export type StkFailureCode = 'payer_insufficient_funds' | 'collection_declined' | 'collection_timeout' | 'collection_failed';

/** The failure codes of a prompt that ended unpaid: a success M-Pesa reports afterwards still funds the on-ramp (§14, §18). */
export const PROMPT_ENDED_CODES: readonly StkFailureCode[] = ['payer_insufficient_funds', 'collection_declined', 'collection_timeout', 'collection_failed'];

export type StkVerdict = { paid: true } | { paid: false; code: StkFailureCode; message: string };

const ENDED: Record<string, { code: StkFailureCode; why: string }> = {
  '1': { code: 'payer_insufficient_funds', why: 'The payer\'s M-Pesa balance is insufficient' },
  '1032': { code: 'collection_declined', why: 'The payer cancelled the M-Pesa prompt' },
  '2001': { code: 'collection_declined', why: 'The payer entered a wrong M-Pesa PIN' },
  '1037': { code: 'collection_timeout', why: 'The payer did not answer the M-Pesa prompt in time' },
  '1036': { code: 'collection_timeout', why: 'The payer did not answer the M-Pesa prompt in time' },
  '1019': { code: 'collection_timeout', why: 'The M-Pesa prompt expired before the payer answered' },
};

/** The verdict of one STK ResultCode; `description` is Safaricom's ResultDesc, already safe to repeat. */
export function stkResult(resultCode: string, description = ''): StkVerdict {
  const code = resultCode.trim();
  if (code === '0') return { paid: true };
  const known = ENDED[code];
  const said = description ? `: ${description}` : '';
  if (known) return { paid: false, code: known.code, message: `${known.why} (ResultCode ${code})${said}` };
  // 17, 26, 1001, 1025, 9999 and anything unpublished: M-Pesa ended the prompt without collecting.
  return { paid: false, code: 'collection_failed', message: `M-Pesa did not collect the payment (ResultCode ${code})${said}` };
}

/**
 * Where a payment intent's current prompt goes when it ends unpaid: it waits for payment again, or has expired when
 * its `expires_at` has passed. Null: the intent is not waiting on that prompt, so nothing moves.
 */
export function intentAfterUnpaidPrompt(intent: { status: string; current: boolean; fullyPaid: boolean; expiresAt: Date }, now: Date): 'awaiting_payment' | 'expired' | null {
  if (intent.status !== 'processing' || !intent.current || intent.fullyPaid) return null;
  return intent.expiresAt <= now ? 'expired' : 'awaiting_payment';
}

/** Where an on-ramp goes when its prompt ends unpaid: failed, only from awaiting_funds (a later success still funds it). */
export function onrampAfterUnpaidPrompt(status: string): 'failed' | null {
  return status === 'awaiting_funds' ? 'failed' : null;
}
