import type { MigrationInterface, QueryRunner } from 'typeorm';

// The live chain rails' own records.
// - chain_sends: every transaction the platform signs (a managed wallet's USDC, a delivery or refund from the treasury
//   hot wallet, a gas top-up, a sweep), written and committed before it is broadcast: one per reference (our id for
//   what it pays), so a retried or restarted job finds it and checks the chain instead of sending again. The signed
//   bytes are kept (they hold no key) so a dropped transaction is broadcast again unchanged, with the same nonce.
//   Parallel sends from one address take consecutive nonces under a transaction-scoped advisory lock on the address.
// - settlement_transfers.from_address: who sent a counted transfer, so a reorg reverses exactly the entry it made.
// - chain_inflows: USDC that arrived at a managed wallet or the treasury hot wallet from outside (not one of our own
//   sends), found by the settlement watcher; the reconciliation counts it.
export class LiveChain1763800021000 implements MigrationInterface {
  name = 'LiveChain1763800021000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE chain_sends (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        chain text NOT NULL,
        reference text NOT NULL,
        purpose text NOT NULL CHECK (purpose IN ('offramp_funding', 'onramp_delivery', 'refund', 'gas_topup', 'sweep')),
        from_address text NOT NULL CHECK (from_address ~ '^0x[0-9a-f]{40}$'),
        to_address text NOT NULL CHECK (to_address ~ '^0x[0-9a-f]{40}$'),
        hd_index integer CHECK (hd_index >= 0),
        asset text NOT NULL CHECK (asset IN ('USDC', 'native')),
        amount numeric(78, 0) NOT NULL CHECK (amount > 0),
        nonce bigint NOT NULL CHECK (nonce >= 0),
        transaction_hash text NOT NULL CHECK (transaction_hash ~ '^0x[0-9a-f]{64}$'),
        raw_transaction text NOT NULL,
        replaced_hashes text[] NOT NULL DEFAULT '{}',
        broadcasts integer NOT NULL DEFAULT 0,
        status text NOT NULL DEFAULT 'sent' CHECK (status IN ('sent', 'mined', 'reverted', 'failed')),
        block_number bigint,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (environment, chain, reference),
        UNIQUE (environment, chain, from_address, nonce)
      )`);
    await q.query(`CREATE INDEX chain_sends_in_flight ON chain_sends (environment, chain, from_address) WHERE status = 'sent'`);
    await q.query(`CREATE INDEX chain_sends_hash ON chain_sends (transaction_hash)`);
    await q.query(`
      CREATE TABLE chain_inflows (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        chain text NOT NULL,
        address text NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
        kind text NOT NULL CHECK (kind IN ('managed_wallet', 'treasury')),
        wallet_id uuid REFERENCES wallets(id),
        transaction_hash text NOT NULL CHECK (transaction_hash ~ '^0x[0-9a-f]{64}$'),
        log_index integer NOT NULL,
        amount numeric(78, 0) NOT NULL CHECK (amount > 0),
        block_number bigint NOT NULL,
        observed_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (environment, chain, transaction_hash, log_index)
      )`);
    await q.query(`CREATE INDEX chain_inflows_address ON chain_inflows (environment, chain, address)`);
    await q.query(`ALTER TABLE settlement_transfers ADD COLUMN from_address text`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE settlement_transfers DROP COLUMN from_address`);
    await q.query(`DROP TABLE chain_inflows`);
    await q.query(`DROP TABLE chain_sends`);
  }
}
