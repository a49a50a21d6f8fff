import type { MigrationInterface, QueryRunner } from 'typeorm';

// On- and off-ramp transactions and their settlements. A quote starts at most one transaction (unique quote_id:
// the database refuses a second consumption even if Redis forgot the Idempotency-Key). Amounts are copied from the
// quote, so a transaction never depends on a quote row changing.
export class Transactions1763800010000 implements MigrationInterface {
  name = 'Transactions1763800010000';

  async up(q: QueryRunner): Promise<void> {
    // A resource's first history row comes from nothing.
    await q.query(`ALTER TABLE status_history ALTER COLUMN from_status DROP NOT NULL`);
    await q.query(`
      CREATE TABLE transactions (
        id uuid PRIMARY KEY,
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        direction text NOT NULL CHECK (direction IN ('offramp', 'onramp')),
        status text NOT NULL CHECK (status IN ('created', 'awaiting_funds', 'funded', 'signing', 'submitting', 'processing', 'action_required', 'completed', 'failed')),
        quote_id uuid NOT NULL UNIQUE REFERENCES quotes(id),
        external_reference text,
        chain text NOT NULL,
        currency text NOT NULL,
        payment_method text NOT NULL,
        exchange_rate numeric NOT NULL,
        source_amount numeric NOT NULL,
        total_required numeric NOT NULL,
        destination_amount numeric NOT NULL,
        provider_fee numeric NOT NULL,
        platform_fee numeric NOT NULL,
        beneficiary_id uuid REFERENCES beneficiaries(id),
        wallet_id uuid NOT NULL REFERENCES wallets(id),
        wallet_address text NOT NULL,
        customer_id uuid REFERENCES customers(id),
        funding_type text CHECK (funding_type IN ('managed_wallet', 'external_wallet', 'treasury')),
        payer_phone text,
        payer_network text,
        provider_reference text,
        destination_transaction_hash text,
        failure jsonb,
        refund jsonb,
        stalled_at text,
        retry_count integer NOT NULL DEFAULT 0,
        forced_outcome jsonb,
        completed_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CHECK ((direction = 'offramp') = (beneficiary_id IS NOT NULL AND funding_type IS NOT NULL)),
        CHECK ((direction = 'onramp') = (payer_phone IS NOT NULL)),
        CHECK (status NOT IN ('action_required', 'failed') OR failure IS NOT NULL),
        CHECK (status <> 'action_required' OR stalled_at IS NOT NULL)
      )`);
    await q.query(`CREATE INDEX transactions_scope_idx ON transactions (business_id, environment, created_at DESC, id DESC)`);
    await q.query(`CREATE UNIQUE INDEX transactions_external_reference_uq ON transactions (business_id, environment, external_reference) WHERE external_reference IS NOT NULL`);
    await q.query(`CREATE INDEX transactions_open_idx ON transactions (status, updated_at) WHERE status NOT IN ('completed', 'failed')`);

    await q.query(`
      CREATE TABLE settlements (
        id uuid PRIMARY KEY,
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        transaction_id uuid NOT NULL UNIQUE REFERENCES transactions(id),
        status text NOT NULL CHECK (status IN ('awaiting_transfer', 'confirming', 'confirmed', 'expired', 'underpaid')),
        chain text NOT NULL,
        asset text NOT NULL DEFAULT 'USDC',
        token_address text NOT NULL,
        from_address text NOT NULL,
        to_address text NOT NULL,
        hd_index integer NOT NULL CHECK (hd_index >= 0),
        fee_address text NOT NULL,
        amount numeric NOT NULL,
        fee_amount numeric NOT NULL,
        total_required numeric NOT NULL,
        received_amount numeric NOT NULL DEFAULT 0,
        confirmations integer NOT NULL DEFAULT 0,
        required_confirmations integer NOT NULL,
        transaction_hash text,
        block_number bigint,
        execution jsonb NOT NULL,
        expires_at timestamptz NOT NULL,
        detected_at timestamptz,
        confirmed_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE UNIQUE INDEX settlements_deposit_address_uq ON settlements (environment, chain, lower(to_address))`);
    await q.query(`CREATE INDEX settlements_open_idx ON settlements (environment, chain, status) WHERE status IN ('awaiting_transfer', 'confirming')`);

    // Each matching ERC-20 transfer once (a log seen twice is one transfer); received_amount is their sum.
    await q.query(`
      CREATE TABLE settlement_transfers (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        settlement_id uuid NOT NULL REFERENCES settlements(id),
        transaction_hash text NOT NULL CHECK (transaction_hash ~ '^0x[0-9a-f]{64}$'),
        log_index integer NOT NULL,
        amount numeric NOT NULL CHECK (amount > 0),
        block_number bigint,
        block_hash text,
        observed_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (settlement_id, transaction_hash, log_index)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE settlement_transfers`);
    await q.query(`DROP TABLE settlements`);
    await q.query(`DROP TABLE transactions`);

  }
}
