import type { MigrationInterface, QueryRunner } from 'typeorm';

// A row the relay cannot enqueue (a job name this release does not know, a bad job id) waits with a growing delay
// instead of being retried first on every pass, so it never holds back the rows behind it.
export class OutboxBackoff1763800004000 implements MigrationInterface {
  name = 'OutboxBackoff1763800004000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE outbox_jobs ADD COLUMN next_attempt_at timestamptz`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE outbox_jobs DROP COLUMN next_attempt_at`);
  }
}
