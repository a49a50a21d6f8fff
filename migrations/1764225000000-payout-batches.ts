import type { MigrationInterface, QueryRunner } from 'typeorm';

// Payout batches (CONTRACT.md section 16): one request pays many beneficiaries from the treasury. The batch row keeps
// what never changes (its size, the USDC it took from the treasury); its items are treasury-funded off-ramps that name
// it (payout_batch_id, payout_batch_index), and its counts are derived from them.
export class PayoutBatches1764225000000 implements MigrationInterface {
  name = 'PayoutBatches1764225000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE payout_batches (
        id uuid PRIMARY KEY,
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        status text NOT NULL CHECK (status IN ('processing', 'completed')),
        items_count integer NOT NULL CHECK (items_count BETWEEN 1 AND 500),
        total_usdc numeric NOT NULL CHECK (total_usdc > 0),
        external_reference text,
        completed_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CHECK ((status = 'completed') = (completed_at IS NOT NULL))
      )`);
    await q.query(`CREATE INDEX payout_batches_scope_idx ON payout_batches (business_id, environment, created_at DESC, id DESC)`);
    await q.query(`CREATE UNIQUE INDEX payout_batches_external_reference_uq ON payout_batches (business_id, environment, external_reference) WHERE external_reference IS NOT NULL`);

    await q.query(`ALTER TABLE transactions ADD COLUMN payout_batch_id uuid REFERENCES payout_batches(id), ADD COLUMN payout_batch_index integer`);
    await q.query(`CREATE UNIQUE INDEX transactions_payout_batch_idx ON transactions (payout_batch_id, payout_batch_index) WHERE payout_batch_id IS NOT NULL`);
    // A treasury-funded payout spends either a payment intent's payment or a batch's share of the treasury, never both.
    await q.query(`
      DO $$ DECLARE c text; BEGIN
        FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'transactions'::regclass AND contype = 'c'
                   AND pg_get_constraintdef(oid) LIKE '%funding_type = ''treasury''%payment_intent_id IS NOT NULL%' LOOP
          EXECUTE format('ALTER TABLE transactions DROP CONSTRAINT %I', c);
        END LOOP;
      END $$`);
    await q.query(`ALTER TABLE transactions ADD CONSTRAINT transactions_treasury_funding_check
      CHECK ((funding_type = 'treasury') = (num_nonnulls(payment_intent_id, payout_batch_id) = 1))`);
    await q.query(`ALTER TABLE transactions ADD CONSTRAINT transactions_payout_batch_index_check CHECK ((payout_batch_id IS NULL) = (payout_batch_index IS NULL))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions DROP CONSTRAINT transactions_payout_batch_index_check`);
    await q.query(`ALTER TABLE transactions DROP CONSTRAINT transactions_treasury_funding_check`);
    await q.query(`ALTER TABLE transactions DROP COLUMN payout_batch_index, DROP COLUMN payout_batch_id`);
    await q.query(`ALTER TABLE transactions ADD CHECK ((funding_type = 'treasury') = (payment_intent_id IS NOT NULL))`);
    await q.query(`DROP TABLE payout_batches`);
  }
}
