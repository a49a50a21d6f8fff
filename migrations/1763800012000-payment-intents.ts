import type { MigrationInterface, QueryRunner } from 'typeorm';

// Payment intents (a business collects a fiat amount, by mobile money or by USDC to a deposit address of its own),
// the treasury deposits their payments land as, the latest rate per currency the pricing pool observed (intents are
// priced from it at creation), and treasury-funded payout transactions (no wallet; linked to their intent).
export class PaymentIntents1763800012000 implements MigrationInterface {
  name = 'PaymentIntents1763800012000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE exchange_rates (
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        currency text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
        rate numeric NOT NULL CHECK (rate > 0),
        as_of timestamptz NOT NULL,
        PRIMARY KEY (environment, currency)
      )`);

    await q.query(`
      CREATE TABLE payment_intents (
        id uuid PRIMARY KEY,
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        status text NOT NULL CHECK (status IN ('awaiting_payment', 'processing', 'completed', 'cancelled', 'expired')),
        external_reference text,
        currency text NOT NULL,
        amount numeric NOT NULL CHECK (amount > 0),
        accepted_payment_methods text[] NOT NULL CHECK (cardinality(accepted_payment_methods) > 0),
        customer jsonb,
        metadata jsonb NOT NULL DEFAULT '{}',
        chain text NOT NULL,
        exchange_rate numeric NOT NULL CHECK (exchange_rate > 0),
        usdc_amount numeric NOT NULL CHECK (usdc_amount > 0),
        deposit_address text NOT NULL,
        hd_index integer NOT NULL CHECK (hd_index >= 0),
        required_confirmations integer NOT NULL,
        received_amount numeric NOT NULL DEFAULT 0,
        confirmed_amount numeric NOT NULL DEFAULT 0,
        beneficiary_id uuid REFERENCES beneficiaries(id),
        payout_status text CHECK (payout_status IN ('pending', 'processing', 'completed', 'failed')),
        payout_transaction_id uuid,
        payout_error text,
        collection_attempts integer NOT NULL DEFAULT 0,
        payer_phone text,
        payer_network text,
        provider_reference text,
        last_payment_error jsonb,
        expires_at timestamptz NOT NULL,
        cancelled_at timestamptz,
        completed_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CHECK ((payout_status IS NULL) OR beneficiary_id IS NOT NULL),
        CHECK ((status = 'cancelled') = (cancelled_at IS NOT NULL)),
        CHECK ((status = 'completed') = (completed_at IS NOT NULL))
      )`);
    await q.query(`CREATE INDEX payment_intents_scope_idx ON payment_intents (business_id, environment, created_at DESC, id DESC)`);
    await q.query(`CREATE INDEX payment_intents_reference_idx ON payment_intents (business_id, environment, external_reference) WHERE external_reference IS NOT NULL`);
    await q.query(`CREATE UNIQUE INDEX payment_intents_deposit_address_uq ON payment_intents (environment, chain, lower(deposit_address))`);
    await q.query(`CREATE INDEX payment_intents_open_idx ON payment_intents (status, expires_at) WHERE status IN ('awaiting_payment', 'processing')`);

    // One row per payment: a mobile-money receipt or an ERC-20 transfer log, each counted once (payment_key).
    await q.query(`
      CREATE TABLE treasury_deposits (
        id uuid PRIMARY KEY,
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        payment_intent_id uuid NOT NULL REFERENCES payment_intents(id),
        payment_method text NOT NULL CHECK (payment_method IN ('mobile_money', 'stablecoin')),
        status text NOT NULL CHECK (status IN ('pending', 'confirmed', 'failed')),
        payment_key text NOT NULL,
        currency text NOT NULL,
        amount numeric NOT NULL CHECK (amount > 0),
        usdc_amount numeric NOT NULL CHECK (usdc_amount > 0),
        chain text NOT NULL,
        reference text,
        transaction_hash text CHECK (transaction_hash ~ '^0x[0-9a-f]{64}$'),
        block_number bigint,
        block_hash text,
        confirmations integer NOT NULL DEFAULT 0,
        required_confirmations integer NOT NULL,
        late_payment boolean NOT NULL,
        intent_status text NOT NULL,
        failure jsonb,
        observed_at timestamptz NOT NULL DEFAULT now(),
        confirmed_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (environment, payment_method, payment_key),
        CHECK ((status = 'confirmed') = (confirmed_at IS NOT NULL))
      )`);
    await q.query(`CREATE INDEX treasury_deposits_scope_idx ON treasury_deposits (business_id, environment, created_at DESC, id DESC)`);
    await q.query(`CREATE INDEX treasury_deposits_intent_idx ON treasury_deposits (payment_intent_id)`);
    await q.query(`CREATE INDEX treasury_deposits_pending_idx ON treasury_deposits (updated_at) WHERE status = 'pending'`);

    // A treasury-funded payout has no wallet; it names the intent that started it (one payout per intent).
    await q.query(`ALTER TABLE transactions ALTER COLUMN wallet_id DROP NOT NULL, ALTER COLUMN wallet_address DROP NOT NULL`);
    await q.query(`ALTER TABLE transactions ADD COLUMN payment_intent_id uuid UNIQUE REFERENCES payment_intents(id)`);
    await q.query(`ALTER TABLE transactions ADD CHECK ((funding_type = 'treasury') = (payment_intent_id IS NOT NULL))`);
    await q.query(`ALTER TABLE transactions ADD CHECK (funding_type = 'treasury' OR wallet_id IS NOT NULL)`);

    // The treasury's pending side and the inflow it comes from join the ledger's account kinds (both striped).
    await q.query(`ALTER TABLE ledger_accounts DROP CONSTRAINT IF EXISTS ledger_accounts_kind_check`);
    await q.query(`ALTER TABLE ledger_accounts ADD CONSTRAINT ledger_accounts_kind_check
      CHECK (kind IN ('wallet', 'treasury', 'treasury_pending', 'inbound_clearing', 'platform_fees', 'provider_clearing', 'settlement_clearing', 'sandbox_faucet'))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE ledger_accounts DROP CONSTRAINT ledger_accounts_kind_check`);
    await q.query(`ALTER TABLE ledger_accounts ADD CONSTRAINT ledger_accounts_kind_check
      CHECK (kind IN ('wallet', 'treasury', 'platform_fees', 'provider_clearing', 'settlement_clearing', 'sandbox_faucet'))`);
    await q.query(`ALTER TABLE transactions DROP COLUMN payment_intent_id`);
    await q.query(`DROP TABLE treasury_deposits`);
    await q.query(`DROP TABLE payment_intents`);
    await q.query(`DROP TABLE exchange_rates`);
  }
}
