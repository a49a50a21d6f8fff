import type { MigrationInterface, QueryRunner } from 'typeorm';

// Provider truth (CONTRACT §14).
// - provider_requests.sends: how many times a request actually left for the provider (a status query or a request
//   answered from the record does not count), which bounds sending a payout again after M-Pesa said it did not pay.
// - transactions.receipt, treasury_deposits.receipt: the M-Pesa receipt (MpesaReceiptNumber of a collection,
//   TransactionID of a payout), shown as `provider_reference`. The transactions' own provider_reference column keeps
//   Daraja's request id (CheckoutRequestID, ConversationID) that results are matched by.
export class ProviderTruth1763800022500 implements MigrationInterface {
  name = 'ProviderTruth1763800022500';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE provider_requests ADD COLUMN sends integer NOT NULL DEFAULT 0`);
    await q.query(`ALTER TABLE transactions ADD COLUMN receipt text`);
    await q.query(`ALTER TABLE treasury_deposits ADD COLUMN receipt text`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE treasury_deposits DROP COLUMN receipt`);
    await q.query(`ALTER TABLE transactions DROP COLUMN receipt`);
    await q.query(`ALTER TABLE provider_requests DROP COLUMN sends`);
  }
}
