import type { MigrationInterface, QueryRunner } from 'typeorm';

// Every unit of money has an exit (CONTRACT.md section 14).
// - transactions.refund_address: where an external-wallet off-ramp's refunds go (null: back to from_address).
// - transactions.refund_due_at: when USDC an off-ramp holds goes back without the business: AUTO_REFUND_AFTER_SECONDS
//   after it started waiting in action_required on `underpaid` or `late_deposit`, or at once for the excess of a
//   completed one. Null once returned; the sweeper finds those past it whose job was lost.
export class Refunds1763800026000 implements MigrationInterface {
  name = 'Refunds1763800026000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions ADD COLUMN refund_address text CHECK (refund_address ~ '^0x[0-9a-fA-F]{40}$')`);
    await q.query(`ALTER TABLE transactions ADD COLUMN refund_due_at timestamptz`);
    await q.query(`CREATE INDEX transactions_refund_due_idx ON transactions (refund_due_at) WHERE refund_due_at IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX transactions_refund_due_idx`);
    await q.query(`ALTER TABLE transactions DROP COLUMN refund_due_at`);
    await q.query(`ALTER TABLE transactions DROP COLUMN refund_address`);
  }
}
