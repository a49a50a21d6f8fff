import type { MigrationInterface, QueryRunner } from 'typeorm';
import { getConfig } from '../shared/config.js';
import type { KeyConfig } from '../shared/domain/payer-data.js';
import { LEGACY_DIGESTS, redigestPayers } from '../shared/domain/payer-digests.js';

// CONTRACT 18: a payer's digest is keyed (HMAC under a key derived from ENCRYPTION_KEYS), no longer the plain
// sha256("rampway-payer:" + msisdn) that 2 x 10^8 Kenyan numbers reverse in seconds. Collection requests are
// re-digested from their payer's sealed phone; stored callbacks already applied lose theirs, waiting ones follow their
// request. The keys come from ENCRYPTION_KEYS through the app's config; a test may hand its own.
export class KeyedPayerDigests1764500200000 implements MigrationInterface {
  name = 'KeyedPayerDigests1764500200000';

  constructor(private readonly keys?: KeyConfig) {}

  async up(q: QueryRunner): Promise<void> {
    // A database with no digests (a new one) needs no keys: the release phase starts without ENCRYPTION_KEYS.
    const any: unknown[] = await q.query(`SELECT 1 FROM provider_requests WHERE kind = 'collection' AND request ? 'payer'
      UNION ALL SELECT 1 FROM provider_callbacks WHERE payer_key IS NOT NULL LIMIT 1`);
    if (!any.length) return;
    // Digests exist: they must be keyed under the keys the service uses. In production the development key would
    // re-digest them under a key no process holds (no callback would match its payer again): refuse, naming the fix.
    const config = getConfig();
    if (!this.keys && config.nodeEnv === 'production' && !config.encryptionKeysConfigured) {
      throw new Error('This release re-digests stored payer digests under ENCRYPTION_KEYS (CONTRACT 18): set ENCRYPTION_KEYS for the release phase of this one deploy');
    }
    await redigestPayers(q, (this.keys ?? config).encryptionKeys);
  }

  async down(q: QueryRunner): Promise<void> {
    await redigestPayers(q, (this.keys ?? getConfig()).encryptionKeys, { target: LEGACY_DIGESTS });
  }
}
