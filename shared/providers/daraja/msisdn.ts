// The MSISDN form Daraja wants, and the digest of it that stands for a payer wherever the number itself must not be kept
// (provider_requests, provider_callbacks).
import { createHash, createHmac, hkdfSync } from 'node:crypto';
import type { MasterKey } from '../../crypto/envelope.js';
import { AppError } from '../../errors.js';

/** +254 7XX XXX XXX (or 07XX...) -> 2547XXXXXXXX, the MSISDN form Daraja wants. */
export function msisdn(phone: string): string {
  const digits = phone.replace(/[^\d]/g, '');
  const national = digits.startsWith('254') ? digits.slice(3) : digits.replace(/^0/, '');
  if (!/^[17]\d{8}$/.test(national)) throw new AppError('requirements_not_met', 'The phone number is not a Kenyan mobile number M-Pesa can reach.', [{ path: 'phone_number', message: 'must be a Kenyan mobile number' }]);
  return `254${national}`;
}

/** The HMAC key of payer digests under one key of ENCRYPTION_KEYS: derived from it (HKDF), never the key itself. */
const digestKeys = new WeakMap<Buffer, Buffer>();
function digestKey(key: MasterKey): Buffer {
  let derived = digestKeys.get(key.key);
  if (!derived) {
    derived = Buffer.from(hkdfSync('sha256', key.key, Buffer.alloc(0), 'rampway payer digest', 32));
    digestKeys.set(key.key, derived);
  }
  return derived;
}

/**
 * Who a prompt went to, as stored with its request: `<key id>:<HMAC-SHA256 of the MSISDN>` under one key of
 * ENCRYPTION_KEYS (never the number, never a plain hash: 2 x 10^8 Kenyan numbers would reverse that in seconds), so an
 * STK callback's PhoneNumber can be checked against the request. Null for what is not a Kenyan mobile number.
 */
export function payerDigest(key: MasterKey, phone: string): string | null {
  try {
    return `${key.id}:${createHmac('sha256', digestKey(key)).update(msisdn(phone)).digest('hex')}`;
  } catch {
    return null;
  }
}

/** A request's payer digest: under the current (first) key. */
export function payerKey(keys: readonly MasterKey[], phone: string): string | null {
  return payerDigest(keys[0], phone);
}

/**
 * A callback's payer digests: under every key of ENCRYPTION_KEYS, so it matches a request digested under any key still
 * listed (during a rotation, requests made before it are under the previous key until the rotation re-digests them).
 */
export function payerKeys(keys: readonly MasterKey[], phone: string): string[] {
  return keys.map((k) => payerDigest(k, phone)).filter((d): d is string => d !== null);
}

/** The key id a digest was made under; '' for the unkeyed digests of old rows (legacyPayerKey). */
export function digestKeyId(digest: string): string {
  const colon = digest.indexOf(':');
  return colon < 0 ? '' : digest.slice(0, colon);
}

/** provider_callbacks.payer_key holds a callback's digests space-separated (one per key when it arrived). */
export function joinPayerKeys(digests: readonly string[]): string | null {
  return digests.length ? digests.join(' ') : null;
}

export function splitPayerKeys(stored: string | null | undefined): string[] {
  return stored ? stored.split(' ').filter(Boolean) : [];
}

/** The plain hash old rows kept (before keyed digests); only migrations compute it, to find and replace it. */
export function legacyPayerKey(phone: string): string | null {
  try {
    return createHash('sha256').update(`rampway-payer:${msisdn(phone)}`).digest('hex');
  } catch {
    return null;
  }
}
