import type { MigrationInterface, QueryRunner } from 'typeorm';

const ENV = `environment text NOT NULL CHECK (environment IN ('sandbox', 'live'))`;
const CHAIN_LIST = `('base', 'polygon', 'arbitrum', 'optimism', 'avalanche')`;

/** The deferred check that a journal entry balances (its first form; 1764700000000 reads it in one statement). */
export const LEDGER_ENTRY_BALANCED = `
      CREATE FUNCTION ledger_entry_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        entry uuid;
      BEGIN
        IF TG_TABLE_NAME = 'journal_entries' THEN entry := NEW.id; ELSE entry := NEW.entry_id; END IF;
        IF (SELECT count(*) FROM ledger_postings WHERE entry_id = entry) < 2 THEN
          RAISE EXCEPTION 'journal entry % has fewer than two postings', entry USING ERRCODE = '23514';
        END IF;
        IF EXISTS (SELECT 1 FROM ledger_postings WHERE entry_id = entry GROUP BY asset HAVING sum(amount) <> 0) THEN
          RAISE EXCEPTION 'journal entry % does not balance to zero per asset', entry USING ERRCODE = '23514';
        END IF;
        RETURN NULL;
      END $$`;

export class CustomersWalletsLedger1763800001000 implements MigrationInterface {
  name = 'CustomersWalletsLedger1763800001000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE customers (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        business_id uuid NOT NULL REFERENCES businesses(id),
        ${ENV},
        external_reference text NOT NULL CHECK (length(external_reference) BETWEEN 1 AND 128),
        display_name text CHECK (display_name IS NULL OR length(display_name) BETWEEN 1 AND 200),
        metadata jsonb NOT NULL DEFAULT '{}',
        status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
        archived_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (business_id, environment, external_reference),
        UNIQUE (id, business_id, environment)
      )`);
    await q.query(`CREATE INDEX customers_list_idx ON customers (business_id, environment, created_at DESC, id DESC)`);

    // One BIP-44 address index space for every HD-derived address; a sequence never hands out the same index twice.
    await q.query(`CREATE SEQUENCE hd_address_index AS integer MINVALUE 0 START 0 MAXVALUE 2147483647 NO CYCLE`);
    await q.query(`
      CREATE TABLE wallets (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        business_id uuid NOT NULL REFERENCES businesses(id),
        ${ENV},
        customer_id uuid,
        type text NOT NULL CHECK (type IN ('managed_wallet', 'external_wallet')),
        chain text NOT NULL CHECK (chain IN ${CHAIN_LIST}),
        address text NOT NULL CHECK (address ~ '^0x[0-9a-fA-F]{40}$'),
        hd_index integer CHECK (hd_index >= 0),
        label text CHECK (label IS NULL OR length(label) <= 120),
        ownership_status text NOT NULL CHECK (ownership_status IN ('managed', 'unverified', 'verified')),
        status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
        verified_at timestamptz,
        archived_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        FOREIGN KEY (customer_id, business_id, environment) REFERENCES customers (id, business_id, environment),
        CHECK ((type = 'managed_wallet') = (hd_index IS NOT NULL)),
        CHECK ((type = 'managed_wallet') = (ownership_status = 'managed')),
        CHECK (type <> 'managed_wallet' OR customer_id IS NOT NULL),
        CHECK ((ownership_status = 'verified') = (verified_at IS NOT NULL)),
        CHECK ((status = 'archived') = (archived_at IS NOT NULL)),
        UNIQUE (id, business_id, environment)
      )`);
    await q.query(`CREATE UNIQUE INDEX wallets_hd_index_uq ON wallets (environment, hd_index) WHERE hd_index IS NOT NULL`);
    await q.query(`CREATE UNIQUE INDEX wallets_managed_per_customer_uq ON wallets (customer_id) WHERE type = 'managed_wallet'`);
    await q.query(`CREATE UNIQUE INDEX wallets_active_address_uq ON wallets (business_id, environment, chain, lower(address)) WHERE status = 'active'`);
    await q.query(`CREATE INDEX wallets_list_idx ON wallets (business_id, environment, created_at DESC, id DESC) WHERE status = 'active'`);
    await q.query(`CREATE INDEX wallets_address_idx ON wallets (lower(address))`);

    await q.query(`
      CREATE TABLE wallet_challenges (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        business_id uuid NOT NULL,
        ${ENV},
        wallet_id uuid NOT NULL,
        nonce text NOT NULL,
        message text NOT NULL,
        expires_at timestamptz NOT NULL,
        used_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        FOREIGN KEY (wallet_id, business_id, environment) REFERENCES wallets (id, business_id, environment)
      )`);
    await q.query(`CREATE INDEX wallet_challenges_wallet_idx ON wallet_challenges (wallet_id)`);

    // The double-entry ledger. Balances are sums of postings; entries and postings are never rewritten.
    await q.query(`
      CREATE TABLE ledger_accounts (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        business_id uuid NOT NULL REFERENCES businesses(id),
        ${ENV},
        kind text NOT NULL CHECK (kind IN ('wallet', 'treasury', 'platform_fees', 'provider_clearing', 'settlement_clearing', 'sandbox_faucet')),
        asset text NOT NULL CHECK (asset ~ '^[A-Z]{3,5}$'),
        wallet_id uuid,
        chain text CHECK (chain IS NULL OR chain IN ${CHAIN_LIST}),
        account_key text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        FOREIGN KEY (wallet_id, business_id, environment) REFERENCES wallets (id, business_id, environment),
        CHECK ((kind = 'wallet') = (wallet_id IS NOT NULL)),
        UNIQUE (business_id, environment, account_key),
        UNIQUE (id, business_id, environment, asset)
      )`);
    await q.query(`
      CREATE TABLE journal_entries (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        business_id uuid NOT NULL REFERENCES businesses(id),
        ${ENV},
        kind text NOT NULL CHECK (length(kind) BETWEEN 1 AND 64),
        reference text,
        description text,
        metadata jsonb NOT NULL DEFAULT '{}',
        created_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (business_id, environment, reference),
        UNIQUE (id, business_id, environment)
      )`);
    await q.query(`CREATE INDEX journal_entries_list_idx ON journal_entries (business_id, environment, created_at DESC, id DESC)`);
    // The composite foreign keys keep a posting in its entry's business and environment, and in its account's asset.
    await q.query(`
      CREATE TABLE ledger_postings (
        id bigserial PRIMARY KEY,
        entry_id uuid NOT NULL,
        account_id uuid NOT NULL,
        business_id uuid NOT NULL,
        ${ENV},
        asset text NOT NULL,
        amount numeric(38, 0) NOT NULL CHECK (amount <> 0),
        created_at timestamptz NOT NULL DEFAULT now(),
        FOREIGN KEY (entry_id, business_id, environment) REFERENCES journal_entries (id, business_id, environment),
        FOREIGN KEY (account_id, business_id, environment, asset) REFERENCES ledger_accounts (id, business_id, environment, asset)
      )`);
    await q.query(`CREATE INDEX ledger_postings_account_idx ON ledger_postings (account_id)`);
    await q.query(`CREATE INDEX ledger_postings_entry_idx ON ledger_postings (entry_id)`);

    // Checked at commit, so an entry and its postings can be inserted in any order within one transaction.
    await q.query(LEDGER_ENTRY_BALANCED);
    for (const table of ['journal_entries', 'ledger_postings']) {
      await q.query(`
        CREATE CONSTRAINT TRIGGER ${table}_balanced AFTER INSERT ON ${table}
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_entry_balanced()`);
      await q.query(`CREATE TRIGGER ${table}_append_only BEFORE UPDATE OR DELETE ON ${table} FOR EACH ROW EXECUTE FUNCTION forbid_mutation()`);
      await q.query(`CREATE TRIGGER ${table}_no_truncate BEFORE TRUNCATE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION forbid_mutation()`);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE ledger_postings`);
    await q.query(`DROP TABLE journal_entries`);
    await q.query(`DROP FUNCTION ledger_entry_balanced()`);
    await q.query(`DROP TABLE ledger_accounts`);
    await q.query(`DROP TABLE wallet_challenges`);
    await q.query(`DROP TABLE wallets`);
    await q.query(`DROP SEQUENCE hd_address_index`);
    await q.query(`DROP TABLE customers`);
  }
}
