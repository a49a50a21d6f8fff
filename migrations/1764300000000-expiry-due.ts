import type { MigrationInterface, QueryRunner } from 'typeorm';

// Quotes and settlements expire by the clock: every second a job asks which ones are due. A partial index each keeps
// that question to the few still open, however many have been taken or funded.
export class ExpiryDue1764300000000 implements MigrationInterface {
  name = 'ExpiryDue1764300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX quotes_available_expiry_idx ON quotes (expires_at) WHERE status = 'available'`);
    await q.query(`CREATE INDEX settlements_awaiting_expiry_idx ON settlements (expires_at) WHERE status = 'awaiting_transfer'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX settlements_awaiting_expiry_idx`);
    await q.query(`DROP INDEX quotes_available_expiry_idx`);
  }
}
