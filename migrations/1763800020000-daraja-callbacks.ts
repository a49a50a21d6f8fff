import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Live M-Pesa: every callback Daraja posts is kept raw (deduplicated by its body's hash) before any work, and a provider
 * request may be `sending`: written before the request leaves, so a job that died in between asks Daraja before it
 * sends again.
 */
export class DarajaCallbacks1763800020000 implements MigrationInterface {
  name = 'DarajaCallbacks1763800020000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE provider_callbacks (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        provider text NOT NULL,
        kind text NOT NULL,
        body jsonb NOT NULL,
        body_hash text NOT NULL UNIQUE,
        source_ip text,
        received_at timestamptz NOT NULL DEFAULT now(),
        processed_at timestamptz,
        result text
      )`);
    await q.query(`ALTER TABLE provider_requests DROP CONSTRAINT provider_requests_outcome_check`);
    await q.query(`ALTER TABLE provider_requests ADD CONSTRAINT provider_requests_outcome_check
      CHECK (outcome->>'status' IN ('sending', 'succeeded', 'pending', 'declined', 'rejected', 'temporary_failure'))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DELETE FROM provider_requests WHERE outcome->>'status' = 'sending'`);
    await q.query(`ALTER TABLE provider_requests DROP CONSTRAINT provider_requests_outcome_check`);
    await q.query(`ALTER TABLE provider_requests ADD CONSTRAINT provider_requests_outcome_check
      CHECK (outcome->>'status' IN ('succeeded', 'pending', 'declined', 'rejected', 'temporary_failure'))`);
    await q.query(`DROP TABLE provider_callbacks`);
  }
}
