import type { MigrationInterface, QueryRunner } from 'typeorm';

// A payout request's state in typed columns instead of flags in `outcome` (issue 36, CONTRACT §18): `answer`, the
// final answer about the latest request (shared/kernel/payout-answers.ts); `conversation_id`, the provider's id of
// the latest request, which a Result must name; `status_queries`, the status queries asked since it left; `claimed`,
// a failure a Result claimed, waiting for the status check. Existing rows are read into them once.
export class PayoutAnswers1764400000000 implements MigrationInterface {
  name = 'PayoutAnswers1764400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE provider_requests
      ADD COLUMN answer text CHECK (answer IN ('paid', 'failed_permanent', 'failed_temporary', 'absent')),
      ADD COLUMN conversation_id text CHECK (length(conversation_id) BETWEEN 1 AND 100),
      ADD COLUMN status_queries text[] NOT NULL DEFAULT '{}',
      ADD COLUMN claimed jsonb CHECK (claimed IS NULL OR claimed->>'status' IN ('rejected', 'declined', 'temporary_failure'))`);
    await q.query(`UPDATE provider_requests SET
        answer = CASE WHEN outcome->>'status' = 'succeeded' THEN 'paid'
                      WHEN outcome->>'status' IN ('rejected', 'declined') THEN 'failed_permanent'
                      WHEN outcome->>'absent' = 'true' OR outcome->>'ended' = 'true' THEN CASE WHEN outcome->>'ended' = 'true' THEN 'failed_temporary' ELSE 'absent' END
                      WHEN environment = 'sandbox' AND outcome->>'status' = 'temporary_failure' THEN 'failed_temporary' END,
        conversation_id = CASE WHEN outcome->>'status' <> 'sending' THEN nullif(outcome->>'provider_reference', '') END,
        status_queries = coalesce(ARRAY(SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(outcome->'queries') = 'array' THEN outcome->'queries' ELSE '[]'::jsonb END)), '{}'),
        claimed = CASE WHEN outcome->'claimed'->>'status' IN ('rejected', 'declined', 'temporary_failure') THEN outcome->'claimed' END
      WHERE kind = 'payout'`);
    await q.query(`UPDATE provider_requests SET outcome = outcome - 'absent' - 'queried' - 'queries' - 'claimed' - 'answered' WHERE kind = 'payout'`);
    await q.query(`CREATE INDEX provider_requests_status_queries_idx ON provider_requests USING gin (status_queries) WHERE kind = 'payout'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`UPDATE provider_requests SET outcome = outcome
        || CASE WHEN answer IN ('absent', 'failed_temporary') THEN '{"absent": true}'::jsonb ELSE '{}'::jsonb END
        || CASE WHEN cardinality(status_queries) > 0 THEN jsonb_build_object('queried', status_queries[cardinality(status_queries)], 'queries', to_jsonb(status_queries)) ELSE '{}'::jsonb END
        || CASE WHEN claimed IS NOT NULL THEN jsonb_build_object('claimed', claimed) ELSE '{}'::jsonb END
      WHERE kind = 'payout'`);
    await q.query(`DROP INDEX provider_requests_status_queries_idx`);
    await q.query(`ALTER TABLE provider_requests DROP COLUMN answer, DROP COLUMN conversation_id, DROP COLUMN status_queries, DROP COLUMN claimed`);
  }
}
