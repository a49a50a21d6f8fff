import type { MigrationInterface, QueryRunner } from 'typeorm';

// A payout Result's success is a claim like any other (CONTRACT §14, §18): kept beside the request until Transaction
// Status (MoMo: the status GET) says the latest request paid, so a forged success never marks unpaid money paid.
export class PayoutSuccessClaims1764400600000 implements MigrationInterface {
  name = 'PayoutSuccessClaims1764400600000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE provider_requests DROP CONSTRAINT provider_requests_claimed_check`);
    await q.query(`ALTER TABLE provider_requests ADD CONSTRAINT provider_requests_claimed_check
      CHECK (claimed IS NULL OR claimed->>'status' IN ('succeeded', 'rejected', 'declined', 'temporary_failure'))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`UPDATE provider_requests SET claimed = NULL WHERE claimed->>'status' = 'succeeded'`);
    await q.query(`ALTER TABLE provider_requests DROP CONSTRAINT provider_requests_claimed_check`);
    await q.query(`ALTER TABLE provider_requests ADD CONSTRAINT provider_requests_claimed_check
      CHECK (claimed IS NULL OR claimed->>'status' IN ('rejected', 'declined', 'temporary_failure'))`);
  }
}
