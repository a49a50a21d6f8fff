// Payer digests follow the current key of ENCRYPTION_KEYS (CONTRACT 18, secrets and personal data). A collection
// request's digest not under it (an older key, or the plain hash of old rows) is made again from the payer's sealed
// phone, and a stored callback still waiting to be applied follows its request, so it keeps matching. Key rotation and
// the migration that introduced keyed digests both run this.
import type { MasterKey } from '../crypto/envelope.js';
import { openPayerPhone } from './payer-data.js';
import { digestKeyId, joinPayerKeys, legacyPayerKey, payerDigest, payerKey, splitPayerKeys } from '../providers/daraja/msisdn.js';

type Queryable = { query: (sql: string, params?: unknown[]) => Promise<any> };

export interface RedigestReport {
  /** Requests whose digest moved under the current key. */
  redigested: number;
  /** Requests whose payer could not be confirmed (phone gone or under another number): their digest is dropped. */
  dropped: number;
}

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const ON_RAMP = new RegExp(`^${UUID}$`);
const INTENT_ATTEMPT = new RegExp(`^(${UUID})-\\d+$`);

/** The payer's phone of a collection request, from its on-ramp or payment intent; null when none opens. */
async function phoneOf(q: Queryable, keys: readonly MasterKey[], reference: string): Promise<string | null> {
  const intent = INTENT_ATTEMPT.exec(reference);
  const [table, id] = intent ? (['payment_intents', intent[1]] as const) : ON_RAMP.test(reference) ? (['transactions', reference] as const) : [null, null];
  if (!table) return null;
  return openPayerPhone(q, { encryptionKeys: keys, encryptionKeysConfigured: true }, table, id).catch(() => null);
}

/** Whether `phone` is the number `digest` was made of (an intent's phone may have changed since an earlier attempt). */
function digestOf(keys: readonly MasterKey[], digest: string, phone: string): boolean {
  const keyId = digestKeyId(digest);
  if (keyId === '') return legacyPayerKey(phone) === digest;
  const key = keys.find((k) => k.id === keyId);
  return key !== undefined && payerDigest(key, phone) === digest;
}

/** The digest rows should carry: keyed under the current key, or (a migration's down only) the old plain hash. */
interface DigestTarget {
  of: (phone: string) => string | null;
  /** SQL condition on `d` (a digest): already in the target form. */
  sql: string;
  param: string;
}

const currentKey = (keys: readonly MasterKey[]): DigestTarget => ({
  of: (phone) => payerKey(keys, phone), sql: `left(d, length($1)) = $1`, param: `${keys[0].id}:`,
});

/** The plain hash, for the down of the migration that introduced keyed digests. */
export const LEGACY_DIGESTS: DigestTarget = { of: legacyPayerKey, sql: `d ~ $1`, param: '^[0-9a-f]{64}$' };

/** Moves every collection request's payer digest under keys[0]; callbacks not yet applied follow. Safe to re-run. */
export async function redigestPayers(q: Queryable, keys: readonly MasterKey[], options: { batchSize?: number; target?: DigestTarget } = {}): Promise<RedigestReport> {
  const batchSize = options.batchSize ?? 200;
  const target = options.target ?? currentKey(keys);
  const report: RedigestReport = { redigested: 0, dropped: 0 };
  let after = '00000000-0000-0000-0000-000000000000';
  for (;;) {
    const rows: { id: string; reference: string; payer: string }[] = await q.query(
      `SELECT id, reference, d AS payer FROM (SELECT id, reference, request->>'payer' AS d FROM provider_requests WHERE kind = 'collection') r
        WHERE d IS NOT NULL AND NOT (${target.sql}) AND id > $2 ORDER BY id LIMIT $3`,
      [target.param, after, batchSize],
    );
    for (const row of rows) {
      const phone = await phoneOf(q, keys, row.reference);
      const next = phone && digestOf(keys, row.payer, phone) ? target.of(phone) : null;
      // Conditional: a request re-claimed meanwhile already carries a current digest.
      await q.query(
        `UPDATE provider_requests SET request = CASE WHEN $3::text IS NULL THEN request - 'payer' ELSE jsonb_set(request, '{payer}', to_jsonb($3::text)) END
          WHERE id = $1 AND request->>'payer' = $2`,
        [row.id, row.payer, next],
      );
      if (next) {
        report.redigested += 1;
        // A callback that arrived before (holding the old digest) still matches its request.
        const waiting: { id: string; payer_key: string }[] = await q.query(
          `SELECT id, payer_key FROM provider_callbacks WHERE processed_at IS NULL AND $1 = ANY(string_to_array(payer_key, ' '))`, [row.payer],
        );
        for (const cb of waiting) {
          const digests = new Set(splitPayerKeys(cb.payer_key));
          digests.add(next);
          await q.query(`UPDATE provider_callbacks SET payer_key = $2 WHERE id = $1`, [cb.id, joinPayerKeys([...digests])]);
        }
      } else report.dropped += 1;
    }
    if (rows.length) after = rows[rows.length - 1].id;
    if (rows.length < batchSize) break;
  }
  // A callback already applied needs no digest; a plain hash (no key id) is the phone number at rest: neither is kept.
  await q.query(`UPDATE provider_callbacks SET payer_key = NULL WHERE payer_key IS NOT NULL AND processed_at IS NOT NULL`);
  if (target === LEGACY_DIGESTS) return report;
  const legacy: { id: string; payer_key: string }[] = await q.query(`SELECT id, payer_key FROM provider_callbacks WHERE payer_key IS NOT NULL AND payer_key ~ '(^| )[0-9a-f]{64}( |$)'`);
  for (const cb of legacy) {
    await q.query(`UPDATE provider_callbacks SET payer_key = $2 WHERE id = $1`, [cb.id, joinPayerKeys(splitPayerKeys(cb.payer_key).filter((d) => digestKeyId(d) !== ''))]);
  }
  return report;
}
