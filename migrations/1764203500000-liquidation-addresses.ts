import type { MigrationInterface, QueryRunner } from 'typeorm';

// Liquidation addresses (CONTRACT section 16): a permanent HD-derived deposit address tied to a beneficiary. Each
// confirmed USDC transfer to it is one liquidation_transfers row (once per log) and becomes one off-ramp
// (funding_type 'liquidation_address') whose settlement is the transfer into that shared address: the one settlement
// address that is not unique, so the unique index on settlements skips them.
export class LiquidationAddresses1764203500000 implements MigrationInterface {
  name = 'LiquidationAddresses1764203500000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE liquidation_addresses (
        id uuid PRIMARY KEY,
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        chain text NOT NULL,
        address text NOT NULL CHECK (address ~ '^0x[0-9a-fA-F]{40}$'),
        hd_index integer NOT NULL CHECK (hd_index >= 0),
        beneficiary_id uuid NOT NULL REFERENCES beneficiaries(id),
        customer_id uuid REFERENCES customers(id),
        external_reference text,
        status text NOT NULL CHECK (status IN ('active', 'archived')),
        issued_block bigint CHECK (issued_block >= 0),
        archived_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CHECK ((status = 'archived') = (archived_at IS NOT NULL))
      )`);
    await q.query(`CREATE UNIQUE INDEX liquidation_addresses_address_uq ON liquidation_addresses (environment, chain, lower(address))`);
    await q.query(`CREATE INDEX liquidation_addresses_scope_idx ON liquidation_addresses (business_id, environment, created_at DESC, id DESC)`);

    await q.query(`ALTER TABLE transactions ADD COLUMN liquidation_address_id uuid REFERENCES liquidation_addresses(id)`);
    await q.query(`ALTER TABLE transactions DROP CONSTRAINT IF EXISTS transactions_funding_type_check`);
    await q.query(`ALTER TABLE transactions ADD CONSTRAINT transactions_funding_type_check
      CHECK (funding_type IN ('managed_wallet', 'external_wallet', 'treasury', 'liquidation_address'))`);
    // A liquidation payout has no wallet: its funding address is the liquidation address.
    await q.query(`ALTER TABLE transactions DROP CONSTRAINT IF EXISTS transactions_check5`);
    await q.query(`ALTER TABLE transactions ADD CONSTRAINT transactions_wallet_check CHECK (funding_type IN ('treasury', 'liquidation_address') OR wallet_id IS NOT NULL)`);
    await q.query(`ALTER TABLE transactions ADD CONSTRAINT transactions_liquidation_check CHECK ((funding_type = 'liquidation_address') = (liquidation_address_id IS NOT NULL))`);

    await q.query(`ALTER TABLE settlements ADD COLUMN liquidation_address_id uuid REFERENCES liquidation_addresses(id)`);
    await q.query(`DROP INDEX settlements_deposit_address_uq`);
    await q.query(`CREATE UNIQUE INDEX settlements_deposit_address_uq ON settlements (environment, chain, lower(to_address)) WHERE liquidation_address_id IS NULL`);

    // Each transfer once (a log seen twice is one transfer); `transaction_id` once its off-ramp exists. `archived`: the
    // address was archived when it arrived; `rejection`: why it goes back to its sender (decided when it is priced).
    await q.query(`
      CREATE TABLE liquidation_transfers (
        id uuid PRIMARY KEY,
        liquidation_address_id uuid NOT NULL REFERENCES liquidation_addresses(id),
        transaction_hash text NOT NULL CHECK (transaction_hash ~ '^0x[0-9a-f]{64}$'),
        log_index integer NOT NULL,
        amount numeric NOT NULL CHECK (amount > 0),
        from_address text NOT NULL,
        block_number bigint,
        block_hash text,
        archived boolean NOT NULL,
        transaction_id uuid UNIQUE REFERENCES transactions(id),
        rejection jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (liquidation_address_id, transaction_hash, log_index)
      )`);
    await q.query(`CREATE INDEX liquidation_transfers_unpriced_idx ON liquidation_transfers (created_at) WHERE transaction_id IS NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE liquidation_transfers`);
    await q.query(`DROP INDEX settlements_deposit_address_uq`);
    await q.query(`ALTER TABLE settlements DROP COLUMN liquidation_address_id`);
    await q.query(`CREATE UNIQUE INDEX settlements_deposit_address_uq ON settlements (environment, chain, lower(to_address))`);
    await q.query(`ALTER TABLE transactions DROP CONSTRAINT transactions_liquidation_check`);
    await q.query(`ALTER TABLE transactions DROP CONSTRAINT transactions_wallet_check`);
    await q.query(`ALTER TABLE transactions ADD CONSTRAINT transactions_check5 CHECK (funding_type = 'treasury' OR wallet_id IS NOT NULL)`);
    await q.query(`ALTER TABLE transactions DROP CONSTRAINT transactions_funding_type_check`);
    await q.query(`ALTER TABLE transactions ADD CONSTRAINT transactions_funding_type_check CHECK (funding_type IN ('managed_wallet', 'external_wallet', 'treasury'))`);
    await q.query(`ALTER TABLE transactions DROP COLUMN liquidation_address_id`);
    await q.query(`DROP TABLE liquidation_addresses`);
  }
}
