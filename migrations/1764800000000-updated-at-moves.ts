import type { MigrationInterface, QueryRunner } from 'typeorm';

// A row's version as a read sees it is its xmin with its updated_at (shared/db/row-version.ts, api/rendered.ts). xmin
// alone names a version within one server's history; a replica promoted after a failover (or a server restored to an
// earlier point, or one that lost its last asynchronous commits in a crash) gives out again the transaction ids of
// transactions that are lost, and only a different updated_at tells a new version from a lost one that a web process
// may have read. So on the four tables whose rows are rendered that way, an update that leaves updated_at as it was
// (recording a receipt, a refund address, a refund's due time) sets it to its transaction's now(); an update that
// sets updated_at to anything else keeps that value.
const TABLES = ['transactions', 'settlements', 'customers', 'wallets'] as const;

export class UpdatedAtMoves1764800000000 implements MigrationInterface {
  name = 'UpdatedAtMoves1764800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE FUNCTION updated_at_moves() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
          NEW.updated_at := now();
        END IF;
        RETURN NEW;
      END $$`);
    for (const table of TABLES) {
      await q.query(`CREATE TRIGGER ${table}_updated_at_moves BEFORE UPDATE ON ${table} FOR EACH ROW EXECUTE FUNCTION updated_at_moves()`);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of TABLES) await q.query(`DROP TRIGGER ${table}_updated_at_moves ON ${table}`);
    await q.query(`DROP FUNCTION updated_at_moves()`);
  }
}
