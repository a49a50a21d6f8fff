import type { MigrationInterface, QueryRunner } from 'typeorm';

// Quotes: written pending by the API, priced by the pricing pool, consumed once by an on- or off-ramp.
// Amounts are decimal strings in numeric columns, each at its side's scale.
export class Quotes1763800008000 implements MigrationInterface {
  name = 'Quotes1763800008000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE quotes (
        id uuid PRIMARY KEY,
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        direction text NOT NULL CHECK (direction IN ('offramp', 'onramp')),
        status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'available', 'consumed', 'expired', 'failed')),
        chain text NOT NULL,
        currency text NOT NULL,
        payment_method text NOT NULL,
        requested_side text NOT NULL CHECK (requested_side IN ('source', 'destination')),
        requested_amount numeric NOT NULL CHECK (requested_amount >= 0),
        beneficiary_id uuid REFERENCES beneficiaries(id),
        wallet_id uuid REFERENCES wallets(id),
        exchange_rate numeric,
        rate_as_of timestamptz,
        source_amount numeric,
        total_required numeric,
        destination_amount numeric,
        provider_fee numeric,
        platform_fee numeric,
        expires_at timestamptz,
        failure jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CHECK (status IN ('pending', 'failed') OR (exchange_rate IS NOT NULL AND source_amount IS NOT NULL AND total_required IS NOT NULL
               AND destination_amount IS NOT NULL AND provider_fee IS NOT NULL AND platform_fee IS NOT NULL AND expires_at IS NOT NULL)),
        CHECK (status <> 'failed' OR failure IS NOT NULL),
        CHECK ((direction = 'offramp' AND beneficiary_id IS NOT NULL) OR (direction = 'onramp' AND wallet_id IS NOT NULL))
      )`);
    await q.query(`CREATE INDEX quotes_scope_idx ON quotes (business_id, environment, created_at DESC, id DESC)`);
    // The sweeper's look-up: quotes still pending (a pricing job lost with Redis) or available past their expiry.
    await q.query(`CREATE INDEX quotes_open_idx ON quotes (status, created_at) WHERE status IN ('pending', 'available')`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE quotes`);
  }
}
