import type { MigrationInterface, QueryRunner } from 'typeorm';

// Every status change, as the transition function records it: append-only, one row per move. Events gain a
// sequence so that several written in one transaction (one created_at) keep the order they happened in.
export class StatusHistory1763800006000 implements MigrationInterface {
  name = 'StatusHistory1763800006000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE status_history (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        resource_type text NOT NULL,
        resource_id uuid NOT NULL,
        from_status text NOT NULL,
        to_status text NOT NULL,
        reason text,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp()
      )`);
    await q.query(`CREATE INDEX status_history_resource_idx ON status_history (resource_id, id)`);
    await q.query(`CREATE TRIGGER status_history_append_only BEFORE UPDATE OR DELETE ON status_history FOR EACH ROW EXECUTE FUNCTION forbid_mutation()`);
    await q.query(`ALTER TABLE events ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY`);
    await q.query(`CREATE UNIQUE INDEX events_seq_idx ON events (seq)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events DROP COLUMN seq`);
    await q.query(`DROP TABLE status_history`);
  }
}
