import type { MigrationInterface, QueryRunner } from 'typeorm';

// Chain truth (CONTRACT.md section 14).
// - settlements.issued_block, payment_intents.issued_block: the chain head when a live deposit address was issued, so
//   the watcher's first scan of a chain starts early enough to see every transfer to an address still open (null:
//   the sandbox chain, which has no head, and rows issued before this column existed).
// - chain_sends.signed_block: the chain head when the send was (last) signed. Its nonce was free there, so the
//   transaction that later took the nonce is searched for from that block on: the affirmative evidence a send needs
//   before it is signed again.
export class ChainTruth1763800025000 implements MigrationInterface {
  name = 'ChainTruth1763800025000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE settlements ADD COLUMN issued_block bigint CHECK (issued_block >= 0)`);
    await q.query(`ALTER TABLE payment_intents ADD COLUMN issued_block bigint CHECK (issued_block >= 0)`);
    await q.query(`ALTER TABLE chain_sends ADD COLUMN signed_block bigint CHECK (signed_block >= 0)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE chain_sends DROP COLUMN signed_block`);
    await q.query(`ALTER TABLE payment_intents DROP COLUMN issued_block`);
    await q.query(`ALTER TABLE settlements DROP COLUMN issued_block`);
  }
}
