import type { MigrationInterface, QueryRunner } from 'typeorm';

// USDC that reaches a managed wallet from outside is credited only once it is as deep as the chain's confirmations
// (a reorg can take a shallower transfer back): an inflow is recorded `pending` with its block, then `credited`, or
// `reorged` when its block left the chain (seen again if it is mined again). Rows recorded before were credited.
export class InflowConfirmations1764300100000 implements MigrationInterface {
  name = 'InflowConfirmations1764300100000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE chain_inflows ADD COLUMN block_hash text, ADD COLUMN from_address text,
      ADD COLUMN status text NOT NULL DEFAULT 'credited' CHECK (status IN ('pending', 'credited', 'reorged'))`);
    await q.query(`ALTER TABLE chain_inflows ALTER COLUMN status SET DEFAULT 'pending'`);
    await q.query(`CREATE INDEX chain_inflows_pending_idx ON chain_inflows (environment, chain, block_number) WHERE status = 'pending'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX chain_inflows_pending_idx`);
    await q.query(`ALTER TABLE chain_inflows DROP COLUMN status, DROP COLUMN from_address, DROP COLUMN block_hash`);
  }
}
