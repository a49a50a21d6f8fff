// Payer personal data (CONTRACT §15): an on-ramp's or an intent collection's payer phone and an intent's customer
// phone and email. Sealed at rest like beneficiary details (one sealed column set per value, see SEALED_COLUMNS) and
// shown everywhere (responses, events, webhooks, logs, stored callbacks) in one redacted form: `+254*****3344`,
// `a***@example.com`. Only the jobs that reach the payer open the sealed value.
import { AppError } from '../errors.js';
import { openJson, sealJson, type MasterKey } from '../crypto/envelope.js';
import { rowAad, sealedColumnList, sealedFromRow, sealedValues, type RowOwner } from '../crypto/sealed-columns.js';

/** ITU calling codes of one and two digits; every other code is three (E.164). */
const SHORT_CODES = new Set(['1', '7', '20', '27', '30', '31', '32', '33', '34', '36', '39', '40', '41', '43', '44', '45', '46', '47', '48', '49',
  '51', '52', '53', '54', '55', '56', '57', '58', '60', '61', '62', '63', '64', '65', '66', '81', '82', '84', '86', '90', '91', '92', '93', '94', '95', '98']);

function callingCode(digits: string): string {
  if (SHORT_CODES.has(digits[0])) return digits[0];
  return SHORT_CODES.has(digits.slice(0, 2)) ? digits.slice(0, 2) : digits.slice(0, 3);
}

/** `+254711223344` -> `+254*****3344`: the country code and the last 4 digits; anything else keeps only its last 4. */
export function redactPhone(phone: string): string {
  const digits = phone.replace(/\D/g, '');
  const last4 = digits.slice(-4);
  if (phone.trim().startsWith('+')) {
    const code = callingCode(digits);
    const hidden = digits.length - code.length - 4;
    if (hidden > 0) return `+${code}${'*'.repeat(hidden)}${last4}`;
  }
  return `${'*'.repeat(Math.max(digits.length - 4, 1))}${last4}`;
}

/** `amina@example.com` -> `a***@example.com`. */
export function redactEmail(email: string): string {
  const at = email.lastIndexOf('@');
  return at > 0 ? `${email[0]}***${email.slice(at)}` : '***';
}

/** An intent's `customer` as stored in the clear and shown: its phone and email redacted, the rest as given. */
export function redactCustomer(customer: Record<string, string> | null | undefined): Record<string, string> | null {
  if (!customer) return null;
  const out = { ...customer };
  if (typeof out.phone_number === 'string') out.phone_number = redactPhone(out.phone_number);
  if (typeof out.email === 'string') out.email = redactEmail(out.email);
  return out;
}

// The sealed column sets below are listed in SEALED_COLUMNS, so key rotation re-seals them.
type PayerTable = 'transactions' | 'payment_intents';
type PayerPrefix = 'payer_phone' | 'customer';

/**
 * The development key's bytes are public: live payer data is never sealed under it (as beneficiaries refuse).
 */
function keysFor(keys: readonly MasterKey[], configured: boolean, environment: string): readonly MasterKey[] {
  if (environment === 'live' && !configured) throw AppError.unavailable('Live payer data cannot be stored on this deployment: set ENCRYPTION_KEYS.', 60);
  return keys;
}

export interface KeyConfig {
  encryptionKeys: readonly MasterKey[];
  encryptionKeysConfigured: boolean;
}

/** `{ <prefix>_key_id: ..., <prefix>_ciphertext: ... }`, ready for an INSERT or a transition's `set`. */
export function sealedPayerColumns(config: KeyConfig, table: PayerTable, prefix: PayerPrefix, owner: RowOwner, value: unknown): Record<string, string | Buffer> {
  const sealed = sealJson(value, keysFor(config.encryptionKeys, config.encryptionKeysConfigured, owner.environment), rowAad(table, prefix, owner));
  const names = sealedColumnList(prefix).split(', ');
  const values = sealedValues(sealed);
  return Object.fromEntries(names.map((n, i) => [n, values[i]]));
}

/** The payer's phone for a job that must reach the payer: opened from the row's sealed column set, never stored open. */
export async function openPayerPhone(q: { query: (sql: string, params?: unknown[]) => Promise<any> }, config: KeyConfig, table: 'transactions' | 'payment_intents', id: string): Promise<string> {
  const rows: (RowOwner & Record<string, unknown>)[] = await q.query(
    `SELECT id, business_id, environment, ${sealedColumnList('payer_phone')} FROM ${table} WHERE id = $1 AND payer_phone_key_id IS NOT NULL`, [id],
  );
  if (!rows[0]) throw new Error(`${table} ${id} has no payer phone`);
  return openJson<string>(sealedFromRow(rows[0], 'payer_phone'), config.encryptionKeys, rowAad(table, 'payer_phone', rows[0]));
}
