import type { MigrationInterface, QueryRunner } from 'typeorm';

// A transaction's refund status in a typed column instead of a field of its JSON (issue 36, CONTRACT §18): the
// refund is a state machine (REFUND_MACHINE, shared/domain/machines.ts) moved only by compare-and-set, and the column
// is what it compares. `refund` keeps the data (amounts, sends, the on-ramp's payout details) and no status; the two
// are null together. A JSON null some refunds were stored as (a refund recorded as none) is no refund.
export class RefundStatus1764600200000 implements MigrationInterface {
  name = 'RefundStatus1764600200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions ADD COLUMN refund_status text CHECK (refund_status IN ('pending', 'completed', 'failed'))`);
    await q.query(`UPDATE transactions SET refund = NULL WHERE jsonb_typeof(refund) = 'null'`);
    await q.query(`UPDATE transactions SET refund_status = refund->>'status', refund = refund - 'status' WHERE refund IS NOT NULL`);
    await q.query(`ALTER TABLE transactions
      ADD CONSTRAINT transactions_refund_status_present CHECK ((refund IS NULL) = (refund_status IS NULL)),
      ADD CONSTRAINT transactions_refund_status_typed CHECK (jsonb_typeof(refund) = 'object' AND NOT refund ? 'status')`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions DROP CONSTRAINT transactions_refund_status_present, DROP CONSTRAINT transactions_refund_status_typed`);
    await q.query(`UPDATE transactions SET refund = refund || jsonb_build_object('status', refund_status) WHERE refund IS NOT NULL`);
    await q.query(`ALTER TABLE transactions DROP COLUMN refund_status`);
  }
}
