import type { MigrationInterface, QueryRunner } from 'typeorm';
import { getConfig } from '../shared/config.js';
import { openJson } from '../shared/crypto/envelope.js';
import { rowAad, sealedColumnList, sealedFromRow } from '../shared/crypto/sealed-columns.js';
import { redactCustomer, redactPhone, sealedPayerColumns, type KeyConfig } from '../shared/domain/payer-data.js';
import { darajaPayerPhone, redactCallbackBody, type DarajaCallbackKind } from '../shared/providers/daraja/callbacks.js';
// The plain hash this migration wrote then (1764500200000 replaces it with keyed digests).
import { legacyPayerKey } from '../shared/providers/daraja/msisdn.js';

// Payer personal data (CONTRACT §15): an on-ramp's and an intent collection's payer phone and an intent's customer are
// sealed like beneficiary details (keys from ENCRYPTION_KEYS, read through the app's config), kept in the clear only
// redacted, and the plaintext columns go. Stored callbacks keep their phone numbers redacted, with the payer's digest
// beside them; events already written show the customer redacted (rewritten once, here, past their append-only guard).
const SEALED_SUFFIXES = ['key_id text', 'wrapped_key bytea', 'iv bytea', 'tag bytea', 'ciphertext bytea'];
const addSealed = (table: string, prefix: string) =>
  `ALTER TABLE ${table} ${SEALED_SUFFIXES.map((c) => `ADD COLUMN ${prefix}_${c}`).join(', ')}`;

type Owner = { id: string; business_id: string; environment: string };

export class PayerData1763800032500 implements MigrationInterface {
  name = 'PayerData1763800032500';

  /** The keys come from ENCRYPTION_KEYS through the app's config; a test may hand its own. */
  constructor(private readonly keys?: KeyConfig) {}

  async up(q: QueryRunner): Promise<void> {
    const config = this.keys ?? getConfig();
    const set = async (table: string, owner: Owner, columns: Record<string, unknown>) => {
      const entries = Object.entries(columns);
      await q.query(`UPDATE ${table} SET ${entries.map(([c], i) => `${c} = $${i + 2}`).join(', ')} WHERE id = $1`, [owner.id, ...entries.map(([, v]) => v)]);
    };

    await q.query(addSealed('transactions', 'payer_phone'));
    await q.query(`ALTER TABLE transactions ADD COLUMN payer_phone_redacted text`);
    const txs: (Owner & { payer_phone: string; refund: Record<string, unknown> | null })[] = await q.query(
      `SELECT id, business_id, environment, payer_phone, refund FROM transactions WHERE payer_phone IS NOT NULL`,
    );
    for (const tx of txs) {
      const shown = redactPhone(tx.payer_phone);
      // A fiat refund's phone was shown in another redaction: it takes the payer format too.
      const refund = tx.refund && 'phone_number' in tx.refund ? JSON.stringify({ ...tx.refund, phone_number: shown }) : tx.refund && JSON.stringify(tx.refund);
      await set('transactions', tx, { payer_phone_redacted: shown, refund, ...sealedPayerColumns(config, 'transactions', 'payer_phone', tx, tx.payer_phone) });
    }
    await q.query(`ALTER TABLE transactions DROP COLUMN payer_phone`);
    await q.query(`ALTER TABLE transactions ADD CONSTRAINT transactions_payer_phone_check CHECK ((direction = 'onramp') = (payer_phone_key_id IS NOT NULL AND payer_phone_redacted IS NOT NULL))`);

    await q.query(addSealed('payment_intents', 'payer_phone'));
    await q.query(addSealed('payment_intents', 'customer'));
    await q.query(`ALTER TABLE payment_intents ADD COLUMN payer_phone_redacted text`);
    const intents: (Owner & { payer_phone: string | null; customer: Record<string, string> | null })[] = await q.query(
      `SELECT id, business_id, environment, payer_phone, customer FROM payment_intents WHERE payer_phone IS NOT NULL OR customer IS NOT NULL`,
    );
    for (const intent of intents) {
      await set('payment_intents', intent, {
        ...(intent.payer_phone
          ? { payer_phone_redacted: redactPhone(intent.payer_phone), ...sealedPayerColumns(config, 'payment_intents', 'payer_phone', intent, intent.payer_phone) }
          : {}),
        ...(intent.customer
          ? { customer: JSON.stringify(redactCustomer(intent.customer)), ...sealedPayerColumns(config, 'payment_intents', 'customer', intent, intent.customer) }
          : {}),
      });
    }
    await q.query(`ALTER TABLE payment_intents DROP COLUMN payer_phone`);
    await q.query(`ALTER TABLE payment_intents ADD CONSTRAINT payment_intents_payer_phone_check CHECK ((payer_phone_key_id IS NULL) = (payer_phone_redacted IS NULL))`);
    await q.query(`ALTER TABLE payment_intents ADD CONSTRAINT payment_intents_customer_check CHECK ((customer IS NULL) = (customer_key_id IS NULL))`);

    // An intent's events carried its customer in full.
    const events: { id: string; customer: Record<string, string> }[] = await q.query(
      `SELECT id, data->'customer' AS customer FROM events WHERE jsonb_typeof(data->'customer') = 'object' AND (data->'customer' ? 'phone_number' OR data->'customer' ? 'email')`,
    );
    await q.query(`ALTER TABLE events DISABLE TRIGGER events_append_only`);
    for (const e of events) {
      await q.query(`UPDATE events SET data = jsonb_set(data, '{customer}', $2::jsonb) WHERE id = $1`, [e.id, JSON.stringify(redactCustomer(e.customer))]);
    }
    await q.query(`ALTER TABLE events ENABLE TRIGGER events_append_only`);

    await q.query(`ALTER TABLE provider_callbacks ADD COLUMN payer_key text`);
    const callbacks: { id: string; kind: DarajaCallbackKind; body: unknown }[] = await q.query(`SELECT id, kind, body FROM provider_callbacks`);
    for (const cb of callbacks) {
      await q.query(`UPDATE provider_callbacks SET body = $2, payer_key = $3 WHERE id = $1`, [
        cb.id, JSON.stringify(redactCallbackBody(cb.body)), legacyPayerKey(darajaPayerPhone(cb.kind, cb.body) ?? ''),
      ]);
    }
  }

  /** Opens the sealed values back into plaintext columns; redacted events and callbacks stay redacted. */
  async down(q: QueryRunner): Promise<void> {
    const keys = (this.keys ?? getConfig()).encryptionKeys;
    const unseal = async (table: string, prefix: string, column: string, type: string) => {
      await q.query(`ALTER TABLE ${table} ADD COLUMN ${column} ${type}`);
      const rows: (Owner & Record<string, unknown>)[] = await q.query(
        `SELECT id, business_id, environment, ${sealedColumnList(prefix)} FROM ${table} WHERE ${prefix}_key_id IS NOT NULL`,
      );
      for (const row of rows) {
        const value = openJson(sealedFromRow(row, prefix), keys, rowAad(table, prefix, row));
        await q.query(`UPDATE ${table} SET ${column} = $2 WHERE id = $1`, [row.id, type === 'jsonb' ? JSON.stringify(value) : value]);
      }
      await q.query(`ALTER TABLE ${table} ${SEALED_SUFFIXES.map((c) => `DROP COLUMN ${prefix}_${c.split(' ')[0]}`).join(', ')}`);
    };
    await q.query(`ALTER TABLE provider_callbacks DROP COLUMN payer_key`);
    await q.query(`ALTER TABLE payment_intents DROP CONSTRAINT payment_intents_customer_check, DROP CONSTRAINT payment_intents_payer_phone_check`);
    await q.query(`ALTER TABLE transactions DROP CONSTRAINT transactions_payer_phone_check`);
    await q.query(`ALTER TABLE payment_intents DROP COLUMN customer`);
    await unseal('payment_intents', 'customer', 'customer', 'jsonb');
    await unseal('payment_intents', 'payer_phone', 'payer_phone', 'text');
    await unseal('transactions', 'payer_phone', 'payer_phone', 'text');
    await q.query(`ALTER TABLE payment_intents DROP COLUMN payer_phone_redacted`);
    await q.query(`ALTER TABLE transactions DROP COLUMN payer_phone_redacted`);
    await q.query(`ALTER TABLE transactions ADD CONSTRAINT transactions_check_payer CHECK ((direction = 'onramp') = (payer_phone IS NOT NULL))`);
  }
}
