import type { MigrationInterface, QueryRunner } from 'typeorm';

// The sweeper looks for payment-intent prompts without a final answer that no check has asked about lately: a
// partial index keeps that query to the few prompts still open, however many requests have been answered.
export class PromptsUnanswered1764225100000 implements MigrationInterface {
  name = 'PromptsUnanswered1764225100000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX provider_requests_open_prompts_idx ON provider_requests (updated_at)
      WHERE kind = 'collection' AND outcome->>'status' IN ('pending', 'sending')`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX provider_requests_open_prompts_idx`);
  }
}
