import type { MigrationInterface, QueryRunner } from 'typeorm';

// Corroboration (CONTRACT §14 "Provider truth"): an STK callback finds its collection request by CheckoutRequestID
// (provider_requests.outcome->>'provider_reference'), or, when the STK Push answer was lost, by a digest of the payer's
// MSISDN among requests still waiting for their answer (request->>'payer').
export class Corroboration1763800026000 implements MigrationInterface {
  name = 'Corroboration1763800026000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX provider_requests_provider_reference_idx ON provider_requests (environment, kind, (outcome->>'provider_reference'))`);
    await q.query(`CREATE INDEX provider_requests_waiting_payer_idx ON provider_requests ((request->>'payer'))
      WHERE kind = 'collection' AND outcome->>'status' = 'sending'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX provider_requests_waiting_payer_idx`);
    await q.query(`DROP INDEX provider_requests_provider_reference_idx`);
  }
}
