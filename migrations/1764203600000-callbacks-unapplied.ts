import type { MigrationInterface, QueryRunner } from 'typeorm';

// The sweeper looks for provider callbacks stored and never applied (their job lost): a partial index keeps that
// one query cheap however many callbacks have been applied.
export class CallbacksUnapplied1764203600000 implements MigrationInterface {
  name = 'CallbacksUnapplied1764203600000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX provider_callbacks_unapplied_idx ON provider_callbacks (received_at) WHERE processed_at IS NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX provider_callbacks_unapplied_idx`);
  }
}
