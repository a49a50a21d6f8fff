import type { MigrationInterface, QueryRunner } from 'typeorm';

// A record whose answer may still be replaced by the work it waits for: POST /quotes commits its quote `pending`
// (202) with its record, and the pricing unit that prices the quote while the request still waits writes the priced
// answer (201) into that record itself, in its own commit, so the request sends it without a statement of its own.
// Whoever answers first closes the record (replaceable = false): the pricing unit as it replaces it, or the request
// when its wait ran out (it then sends what the record holds). A replay always shows what was sent.
export class ReplaceableAnswers1765000000000 implements MigrationInterface {
  name = 'ReplaceableAnswers1765000000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE idempotency_records ADD COLUMN replaceable boolean NOT NULL DEFAULT false`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE idempotency_records DROP COLUMN replaceable`);
  }
}
