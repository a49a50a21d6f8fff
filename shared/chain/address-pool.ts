import { createHash } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import type { Environment } from '../domain/chains.js';
import { allocateHdIndex, managedWalletAddress } from './hd-wallet.js';
import { planOnce } from '../db/prepared-client.js';

// Addresses derived ahead of need. Deriving one is an elliptic-curve step of about a millisecond of CPU: a worker
// does it into hd_address_pool, and a create claims a row (deleted in the creating transaction, so a create that
// rolls back leaves it for the next). An empty pool is not an error: the create derives its own, as before.

export interface ClaimedAddress {
  index: number;
  address: `0x${string}`;
}

/** Names an xpub without storing it: a pooled address is handed out only while its key is the one configured. */
export function xpubId(xpub: string): string {
  return createHash('sha256').update(xpub).digest('hex').slice(0, 16);
}

/** The next address for a managed wallet or deposit address: a pooled one, or one derived now. */
export async function claimAddress(em: EntityManager, environment: Environment, xpub: string): Promise<ClaimedAddress> {
  const claimed: { hd_index: number; address: `0x${string}` }[] = await em.query(
    planOnce(`WITH claimed AS (
       DELETE FROM hd_address_pool WHERE hd_index = (
         SELECT hd_index FROM hd_address_pool WHERE environment = $1 AND xpub_id = $2 ORDER BY hd_index LIMIT 1 FOR UPDATE SKIP LOCKED)
       RETURNING hd_index, address)
     SELECT hd_index, address FROM claimed`),
    [environment, xpubId(xpub)],
  );
  if (claimed[0]) return { index: claimed[0].hd_index, address: claimed[0].address };
  const index = await allocateHdIndex(em);
  return { index, address: managedWalletAddress(xpub, index) };
}

/** Batches of this many addresses per statement: a refill holds no lock for long and yields the CPU between them. */
const BATCH = 100;

/** Tops the environment's pool up to `size` addresses of `xpub`; answers how many it derived. */
export async function refillAddressPool(ds: DataSource, environment: Environment, xpub: string, size: number): Promise<number> {
  const id = xpubId(xpub);
  await ds.query(`DELETE FROM hd_address_pool WHERE environment = $1 AND xpub_id <> $2`, [environment, id]);
  const [{ n }]: { n: number }[] = await ds.query(`SELECT count(*)::int AS n FROM hd_address_pool WHERE environment = $1 AND xpub_id = $2`, [environment, id]);
  let derived = 0;
  for (let missing = size - n; missing > 0; missing -= BATCH) {
    const count = Math.min(BATCH, missing);
    const indexes: { index: number }[] = await ds.query(`SELECT nextval('hd_address_index')::integer AS index FROM generate_series(1, $1)`, [count]);
    const addresses: string[] = [];
    for (const { index } of indexes) {
      addresses.push(managedWalletAddress(xpub, index));
      if (addresses.length % 20 === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    }
    await ds.query(
      `INSERT INTO hd_address_pool (hd_index, environment, xpub_id, address) SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::text[])`,
      [indexes.map((r) => r.index), indexes.map(() => environment), indexes.map(() => id), addresses],
    );
    derived += count;
  }
  return derived;
}
