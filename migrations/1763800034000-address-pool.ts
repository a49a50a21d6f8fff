import type { MigrationInterface, QueryRunner } from 'typeorm';

// Addresses derived ahead of need (CONTRACT.md section 15): a worker derives managed-wallet and deposit addresses from
// the environment's xpub into this pool, and a create claims one (FOR UPDATE SKIP LOCKED, deleted in the creating
// transaction), so no elliptic-curve work sits on the request path. `xpub_id` names the key an address was derived
// from: addresses of a key no longer configured are never handed out. Indexes come from hd_address_index, like every
// other, so an index is used once whether it was pooled or derived on the spot.
export class AddressPool1763800034000 implements MigrationInterface {
  name = 'AddressPool1763800034000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE hd_address_pool (
        hd_index integer PRIMARY KEY CHECK (hd_index >= 0),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        xpub_id text NOT NULL,
        address text NOT NULL CHECK (address ~ '^0x[0-9a-fA-F]{40}$'),
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX hd_address_pool_claim_idx ON hd_address_pool (environment, xpub_id, hd_index)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE hd_address_pool`);
  }
}
