import type { MigrationInterface, QueryRunner } from 'typeorm';

// The platform fee per business (CONTRACT §13, `admin set-fees`): basis points of the source amount, at least a
// minimum in USDC. Defaults are the contract's: 50 bps and no minimum, so every existing business keeps them.
export class BusinessFees1763800007000 implements MigrationInterface {
  name = 'BusinessFees1763800007000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE businesses
        ADD COLUMN platform_fee_bps integer NOT NULL DEFAULT 50 CHECK (platform_fee_bps BETWEEN 0 AND 10000),
        -- USDC: never more precision than its 6 decimals, so the value renders exactly.
        ADD COLUMN platform_fee_min numeric NOT NULL DEFAULT 0 CHECK (platform_fee_min >= 0 AND platform_fee_min = round(platform_fee_min, 6))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE businesses DROP COLUMN platform_fee_min, DROP COLUMN platform_fee_bps`);
  }
}
