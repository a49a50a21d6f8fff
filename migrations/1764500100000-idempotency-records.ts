import type { MigrationInterface, QueryRunner } from 'typeorm';

// Idempotency records kept in PostgreSQL (CONTRACT §3, "The record is durable"): written in the transaction that
// creates or changes the resource, so a Redis that forgets a key (a restart, a failover) never turns a retry into a
// second write. Redis keeps the in-flight lock and a short cache. `scope_key` is sha256(business, environment, the
// client's key): the key's length and characters never shape ours. Deleted after 24 h in batches by created_at.
export class IdempotencyRecords1764500100000 implements MigrationInterface {
  name = 'IdempotencyRecords1764500100000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE idempotency_records (
      scope_key bytea PRIMARY KEY,
      fingerprint text NOT NULL,
      status smallint NOT NULL CHECK (status BETWEEN 200 AND 499),
      body text NOT NULL,
      request_id text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
    await q.query(`CREATE INDEX idempotency_records_created_idx ON idempotency_records (created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE idempotency_records`);
  }
}
