import type { MigrationInterface, QueryRunner } from 'typeorm';

// Treasury withdrawals (CONTRACT.md section 14): the business sends treasury USDC to a verified external wallet of its
// own. The treasury is debited when the row is written (pending); the send completes it (its hash) or it fails (the
// amount returns to the treasury). Live, the hot wallet's send is a chain_sends row of purpose 'withdrawal'.
export class TreasuryWithdrawals1763800031000 implements MigrationInterface {
  name = 'TreasuryWithdrawals1763800031000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE treasury_withdrawals (
        id uuid PRIMARY KEY,
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        wallet_id uuid NOT NULL REFERENCES wallets(id),
        chain text NOT NULL,
        to_address text NOT NULL,
        amount numeric NOT NULL CHECK (amount > 0),
        status text NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
        transaction_hash text CHECK (transaction_hash ~ '^0x[0-9a-f]{64}$'),
        external_reference text,
        failure jsonb,
        completed_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CHECK ((status = 'completed') = (transaction_hash IS NOT NULL AND completed_at IS NOT NULL)),
        CHECK ((status = 'failed') = (failure IS NOT NULL))
      )`);
    await q.query(`CREATE INDEX treasury_withdrawals_scope_idx ON treasury_withdrawals (business_id, environment, created_at DESC, id DESC)`);
    await q.query(`CREATE INDEX treasury_withdrawals_pending_idx ON treasury_withdrawals (updated_at) WHERE status = 'pending'`);

    await q.query(`ALTER TABLE chain_sends DROP CONSTRAINT IF EXISTS chain_sends_purpose_check`);
    await q.query(`ALTER TABLE chain_sends ADD CONSTRAINT chain_sends_purpose_check
      CHECK (purpose IN ('offramp_funding', 'onramp_delivery', 'refund', 'gas_topup', 'sweep', 'withdrawal'))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE chain_sends DROP CONSTRAINT chain_sends_purpose_check`);
    await q.query(`ALTER TABLE chain_sends ADD CONSTRAINT chain_sends_purpose_check CHECK (purpose IN ('offramp_funding', 'onramp_delivery', 'refund', 'gas_topup', 'sweep'))`);
    await q.query(`DROP TABLE treasury_withdrawals`);
  }
}
