import type { MigrationInterface, QueryRunner } from 'typeorm';

export class Beneficiaries1763800002000 implements MigrationInterface {
  name = 'Beneficiaries1763800002000';

  async up(q: QueryRunner): Promise<void> {
    // `details` is only ever stored sealed (shared/crypto/envelope.ts): key id, wrapped data key, iv, tag, ciphertext.
    await q.query(`
      CREATE TABLE beneficiaries (
        id uuid PRIMARY KEY,
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        customer_id uuid,
        currency text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
        payment_method text NOT NULL
          CHECK (payment_method IN ('mobile_money', 'bank_transfer', 'paybill', 'buy_goods', 'email_transfer', 'swift_transfer')),
        account_holder_name text NOT NULL CHECK (length(account_holder_name) BETWEEN 1 AND 140),
        label text CHECK (length(label) <= 120),
        external_reference text CHECK (length(external_reference) BETWEEN 1 AND 128),
        status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
        details_key_id text NOT NULL,
        details_wrapped_key bytea NOT NULL,
        details_iv bytea NOT NULL,
        details_tag bytea NOT NULL,
        details_ciphertext bytea NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        archived_at timestamptz,
        CHECK ((status = 'archived') = (archived_at IS NOT NULL)),
        FOREIGN KEY (customer_id, business_id, environment) REFERENCES customers (id, business_id, environment)
      )`);
    await q.query(`CREATE INDEX beneficiaries_scope_idx ON beneficiaries (business_id, environment, created_at DESC, id DESC)`);
    await q.query(`CREATE INDEX beneficiaries_active_idx ON beneficiaries (business_id, environment, created_at DESC, id DESC) WHERE status = 'active'`);
    // Key rotation looks for rows outside the current key.
    await q.query(`CREATE INDEX beneficiaries_key_idx ON beneficiaries (details_key_id, id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE beneficiaries`);
  }
}
