import type { MigrationInterface, QueryRunner } from 'typeorm';

// Jobs carry references, not money (CONTRACT 18): the unit that decides a hot-wallet send records it in chain_sends
// as `planned` (destination, amount, signer and what it pays for), and the chain.send job signs exactly that row. A
// planned row has no nonce, hash or bytes yet; signing fills them and makes it `sent`.
export class PlannedSends1764301100000 implements MigrationInterface {
  name = 'PlannedSends1764301100000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE chain_sends ALTER COLUMN nonce DROP NOT NULL, ALTER COLUMN transaction_hash DROP NOT NULL, ALTER COLUMN raw_transaction DROP NOT NULL`);
    await q.query(`ALTER TABLE chain_sends DROP CONSTRAINT chain_sends_status_check`);
    await q.query(`ALTER TABLE chain_sends ADD CONSTRAINT chain_sends_status_check CHECK (status IN ('planned', 'sent', 'mined', 'reverted', 'failed'))`);
    await q.query(`ALTER TABLE chain_sends ADD CONSTRAINT chain_sends_signed_check CHECK (
      (status = 'planned') = (nonce IS NULL) AND (nonce IS NULL) = (transaction_hash IS NULL) AND (nonce IS NULL) = (raw_transaction IS NULL))`);
    // What the send pays for: the on-ramp or off-ramp it delivers or refunds (and the refund's total), or the withdrawal.
    await q.query(`ALTER TABLE chain_sends ADD COLUMN transaction_id uuid REFERENCES transactions(id), ADD COLUMN withdrawal_id uuid REFERENCES treasury_withdrawals(id),
      ADD COLUMN refund_total numeric(78, 0) CHECK (refund_total > 0)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DELETE FROM chain_sends WHERE status = 'planned'`);
    await q.query(`ALTER TABLE chain_sends DROP COLUMN refund_total, DROP COLUMN withdrawal_id, DROP COLUMN transaction_id`);
    await q.query(`ALTER TABLE chain_sends DROP CONSTRAINT chain_sends_signed_check`);
    await q.query(`ALTER TABLE chain_sends DROP CONSTRAINT chain_sends_status_check`);
    await q.query(`ALTER TABLE chain_sends ADD CONSTRAINT chain_sends_status_check CHECK (status IN ('sent', 'mined', 'reverted', 'failed'))`);
    await q.query(`ALTER TABLE chain_sends ALTER COLUMN nonce SET NOT NULL, ALTER COLUMN transaction_hash SET NOT NULL, ALTER COLUMN raw_transaction SET NOT NULL`);
  }
}
