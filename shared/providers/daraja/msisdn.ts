// The MSISDN form Daraja wants, and the digest of it that stands for a payer wherever the number itself must not be kept
// (provider_requests, provider_callbacks).
import { createHash } from 'node:crypto';
import { AppError } from '../../errors.js';

/** +254 7XX XXX XXX (or 07XX...) -> 2547XXXXXXXX, the MSISDN form Daraja wants. */
export function msisdn(phone: string): string {
  const digits = phone.replace(/[^\d]/g, '');
  const national = digits.startsWith('254') ? digits.slice(3) : digits.replace(/^0/, '');
  if (!/^[17]\d{8}$/.test(national)) throw new AppError('requirements_not_met', 'The phone number is not a Kenyan mobile number M-Pesa can reach.', [{ path: 'phone_number', message: 'must be a Kenyan mobile number' }]);
  return `254${national}`;
}

/**
 * Who a prompt went to, as stored with its request: a digest of the MSISDN (never the number itself), so an STK
 * callback's PhoneNumber can be checked against the request. Null for what is not a Kenyan mobile number.
 */
export function payerKey(phone: string): string | null {
  try {
    return createHash('sha256').update(`rampway-payer:${msisdn(phone)}`).digest('hex');
  } catch {
    return null;
  }
}
