import type { MigrationInterface, QueryRunner } from 'typeorm';

// One row per (environment, kind, reference): what we asked a fiat provider to do and what it answered. The unique
// key is the provider idempotency key, so a retried job finds the first answer instead of paying twice.
// `request` holds only non-sensitive facts (currency, amount, method, the destination's last 4 characters).
export class ProviderRequests1763800009000 implements MigrationInterface {
  name = 'ProviderRequests1763800009000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE provider_requests (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        kind text NOT NULL CHECK (kind IN ('collection', 'payout')),
        reference text NOT NULL CHECK (length(reference) BETWEEN 1 AND 100),
        request jsonb NOT NULL,
        outcome jsonb NOT NULL CHECK (outcome->>'status' IN ('succeeded', 'pending', 'declined', 'rejected', 'temporary_failure')),
        attempts integer NOT NULL DEFAULT 1 CHECK (attempts >= 1),
        evaluations integer NOT NULL DEFAULT 1 CHECK (evaluations BETWEEN 1 AND attempts),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (environment, kind, reference)
      )`);
    await q.query(`CREATE INDEX provider_requests_scope_idx ON provider_requests (business_id, environment, created_at DESC)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE provider_requests`);
  }
}
