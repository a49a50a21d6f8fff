import type { MigrationInterface, QueryRunner } from 'typeorm';

// The settlement watcher's position on each chain, per environment: the next block it will ask eth_getLogs for.
// A row is written by the first scan (at the chain head then: nothing before the watcher existed is scanned) and moved
// past each range once every matching transfer in it was recorded.
export class ChainCursors1763800015000 implements MigrationInterface {
  name = 'ChainCursors1763800015000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE chain_cursors (
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        chain text NOT NULL,
        next_block bigint NOT NULL CHECK (next_block >= 0),
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (environment, chain)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE chain_cursors`);
  }
}
