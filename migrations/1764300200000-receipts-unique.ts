import type { MigrationInterface, QueryRunner } from 'typeorm';

// One live mobile-money payment, one credit: its receipt (MpesaReceiptNumber, MoMo's financialTransactionId) is
// unique among live intent deposits and among live on-ramps, whichever report named the payment (a callback or STK
// Query by CheckoutRequestID, Pull Transactions by receipt). The domain checks first; this holds when two reports race.
export class ReceiptsUnique1764300200000 implements MigrationInterface {
  name = 'ReceiptsUnique1764300200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE UNIQUE INDEX treasury_deposits_live_receipt_key ON treasury_deposits (receipt) WHERE environment = 'live' AND payment_method = 'mobile_money' AND receipt IS NOT NULL`);
    await q.query(`CREATE UNIQUE INDEX transactions_live_onramp_receipt_key ON transactions (receipt) WHERE environment = 'live' AND direction = 'onramp' AND receipt IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX transactions_live_onramp_receipt_key`);
    await q.query(`DROP INDEX treasury_deposits_live_receipt_key`);
  }
}
