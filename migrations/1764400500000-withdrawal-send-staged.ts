import type { MigrationInterface, QueryRunner } from 'typeorm';

// A withdrawal whose hot-wallet send was staged can no longer be failed back into the treasury by anything but that
// send's own outcome (the kernel simulator's seed 8: a wallet archived after the send was staged, then a second run
// of the send job, returned the amount while the send was mined). The unit that stages the send records it here.
export class WithdrawalSendStaged1764400500000 implements MigrationInterface {
  name = 'WithdrawalSendStaged1764400500000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE treasury_withdrawals ADD COLUMN send_staged_at timestamptz`);
    // Live withdrawals already pending with a staged send: marked, so the rule holds for them too.
    await q.query(`UPDATE treasury_withdrawals w SET send_staged_at = w.updated_at WHERE w.status = 'pending' AND w.environment = 'live'
      AND EXISTS (SELECT 1 FROM outbox_jobs o WHERE o.job_name = 'chain.send' AND o.payload->>'withdrawalId' = w.id::text)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE treasury_withdrawals DROP COLUMN send_staged_at`);
  }
}
