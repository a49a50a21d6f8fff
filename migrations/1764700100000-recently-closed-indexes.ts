import type { MigrationInterface, QueryRunner } from 'typeorm';

// The chain watcher's gate (workers/settlement/scan-chain.job.ts) asks, every poll of every chain, whether a settlement
// or a payment intent of that environment and chain changed within LATE_DEPOSIT_WATCH_SECONDS (a week by default):
// one that closed may still receive a late transfer. Without an index on updated_at that question read every row of
// both tables: 2.2 s a call beside a million transactions (issue 39), most of PostgreSQL's time. With these, it is a
// range read that stops at its first row. The price: an update that sets updated_at also writes these indexes (no
// longer a heap-only update), a few microseconds per update against a read that grew with the tables.
export class RecentlyClosedIndexes1764700100000 implements MigrationInterface {
  name = 'RecentlyClosedIndexes1764700100000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX settlements_changed_idx ON settlements (environment, chain, updated_at)`);
    await q.query(`CREATE INDEX payment_intents_changed_idx ON payment_intents (environment, chain, updated_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX settlements_changed_idx`);
    await q.query(`DROP INDEX payment_intents_changed_idx`);
  }
}
