// How a sealed value sits in a table: five columns under one prefix, e.g. details_key_id, details_wrapped_key,
// details_iv, details_tag, details_ciphertext. The AAD ties it to the row's id, business and environment.
import type { Sealed } from './envelope.js';

/** Every sealed column set in the database; key rotation re-seals all of them. Add new ones here. */
export const SEALED_COLUMNS: readonly { table: string; prefix: string }[] = [
  { table: 'beneficiaries', prefix: 'details' },
  { table: 'webhook_secrets', prefix: 'secret' },
  // Payer personal data (shared/domain/payer-data.ts).
  { table: 'transactions', prefix: 'payer_phone' },
  { table: 'payment_intents', prefix: 'payer_phone' },
  { table: 'payment_intents', prefix: 'customer' },
];

const SUFFIXES = ['key_id', 'wrapped_key', 'iv', 'tag', 'ciphertext'] as const;

export interface RowOwner {
  id: string;
  business_id: string;
  environment: string;
}

/** `details_key_id, details_wrapped_key, ...` for a SELECT or an INSERT column list. */
export function sealedColumnList(prefix: string): string {
  return SUFFIXES.map((s) => `${prefix}_${s}`).join(', ');
}

/** `details_key_id = $2, details_wrapped_key = $3, ...` for an UPDATE, starting at parameter `first`. */
export function sealedAssignments(prefix: string, first: number): string {
  return SUFFIXES.map((s, i) => `${prefix}_${s} = $${first + i}`).join(', ');
}

/** Parameter values in the order of sealedColumnList. */
export function sealedValues(sealed: Sealed): [string, Buffer, Buffer, Buffer, Buffer] {
  return [sealed.keyId, sealed.wrappedKey, sealed.iv, sealed.tag, sealed.ciphertext];
}

export function sealedFromRow(row: Record<string, unknown>, prefix: string): Sealed {
  return {
    keyId: row[`${prefix}_key_id`] as string,
    wrappedKey: row[`${prefix}_wrapped_key`] as Buffer,
    iv: row[`${prefix}_iv`] as Buffer,
    tag: row[`${prefix}_tag`] as Buffer,
    ciphertext: row[`${prefix}_ciphertext`] as Buffer,
  };
}

export function rowAad(table: string, prefix: string, owner: RowOwner): string {
  return `rampway:${table}.${prefix}:${owner.business_id}:${owner.environment}:${owner.id}`;
}
