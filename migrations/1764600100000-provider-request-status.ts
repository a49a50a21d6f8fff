import type { MigrationInterface, QueryRunner } from 'typeorm';

// A provider request's outcome in typed columns instead of a JSON bag (issue 36: a machine with a typed outcome, no
// flag bag): `status` is PROVIDER_REQUEST_MACHINE's column (shared/domain/machines.ts), moved only by compare-and-set;
// `provider_reference`, `receipt`, `failure` and `ended` are the rest of the provider's answer. The indexes and CHECK
// that read `outcome` read the columns.
export class ProviderRequestStatus1764600100000 implements MigrationInterface {
  name = 'ProviderRequestStatus1764600100000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE provider_requests
      ADD COLUMN status text,
      ADD COLUMN provider_reference text,
      ADD COLUMN receipt text,
      ADD COLUMN failure jsonb CHECK (failure IS NULL OR (jsonb_typeof(failure) = 'object' AND jsonb_typeof(failure->'code') = 'string')),
      ADD COLUMN ended boolean NOT NULL DEFAULT false`);
    await q.query(`UPDATE provider_requests SET
        status = outcome->>'status',
        provider_reference = outcome->>'provider_reference',
        receipt = outcome->>'receipt',
        failure = CASE WHEN jsonb_typeof(outcome->'failure') = 'object' THEN outcome->'failure' END,
        ended = coalesce(outcome->>'ended' = 'true', false)`);
    await q.query(`ALTER TABLE provider_requests ALTER COLUMN status SET NOT NULL,
      ADD CONSTRAINT provider_requests_status_check CHECK (status IN ('sending', 'pending', 'succeeded', 'declined', 'rejected', 'temporary_failure'))`);
    await q.query(`DROP INDEX provider_requests_open_prompts_idx`);
    await q.query(`DROP INDEX provider_requests_provider_reference_idx`);
    await q.query(`DROP INDEX provider_requests_waiting_payer_idx`);
    await q.query(`ALTER TABLE provider_requests DROP COLUMN outcome`);
    await q.query(`CREATE INDEX provider_requests_open_prompts_idx ON provider_requests (updated_at) WHERE kind = 'collection' AND status IN ('pending', 'sending')`);
    await q.query(`CREATE INDEX provider_requests_provider_reference_idx ON provider_requests (environment, kind, provider_reference)`);
    await q.query(`CREATE INDEX provider_requests_waiting_payer_idx ON provider_requests ((request->>'payer')) WHERE kind = 'collection' AND status = 'sending'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE provider_requests ADD COLUMN outcome jsonb`);
    await q.query(`UPDATE provider_requests SET outcome = jsonb_build_object('status', status, 'provider_reference', provider_reference)
      || CASE WHEN receipt IS NOT NULL THEN jsonb_build_object('receipt', receipt) ELSE '{}'::jsonb END
      || CASE WHEN failure IS NOT NULL THEN jsonb_build_object('failure', failure) ELSE '{}'::jsonb END
      || CASE WHEN ended THEN '{"ended": true}'::jsonb ELSE '{}'::jsonb END`);
    await q.query(`DROP INDEX provider_requests_open_prompts_idx`);
    await q.query(`DROP INDEX provider_requests_provider_reference_idx`);
    await q.query(`DROP INDEX provider_requests_waiting_payer_idx`);
    await q.query(`ALTER TABLE provider_requests ALTER COLUMN outcome SET NOT NULL,
      ADD CONSTRAINT provider_requests_outcome_check CHECK (outcome->>'status' IN ('sending', 'succeeded', 'pending', 'declined', 'rejected', 'temporary_failure')),
      DROP COLUMN status, DROP COLUMN provider_reference, DROP COLUMN receipt, DROP COLUMN failure, DROP COLUMN ended`);
    await q.query(`CREATE INDEX provider_requests_open_prompts_idx ON provider_requests (updated_at) WHERE kind = 'collection' AND outcome->>'status' IN ('pending', 'sending')`);
    await q.query(`CREATE INDEX provider_requests_provider_reference_idx ON provider_requests (environment, kind, (outcome->>'provider_reference'))`);
    await q.query(`CREATE INDEX provider_requests_waiting_payer_idx ON provider_requests ((request->>'payer')) WHERE kind = 'collection' AND outcome->>'status' = 'sending'`);
  }
}
