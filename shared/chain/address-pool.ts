import { createHash } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import type { Environment } from '../domain/chains.js';
import { allocateHdIndex, managedWalletAddress } from './hd-wallet.js';
import { planOnce } from '../db/prepared-client.js';

// Addresses derived ahead of need. Deriving one is an elliptic-curve step of about 90 µs of CPU (hd-wallet.ts): a worker
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

/**
 * Where this process's next claim starts looking, per environment and key: past the last index it claimed. A claim
 * deletes its row, and until VACUUM runs the index still holds every claimed entry before the live ones: a scan from
 * the start walked all of them (2.4 ms of PostgreSQL's time per claim after 11,000 creates), a cost that grew with
 * every create. One claim in FULL_SCAN_EVERY still starts from the beginning, so a row a rolled-back create left
 * behind an index already passed is handed out too.
 */
const claimFrom = new Map<string, { next: number; claims: number }>();
const FULL_SCAN_EVERY = 64;

/** Where this process's next claim of `xpub`'s addresses starts (0: from the beginning), counted as one claim. */
export function claimStart(environment: Environment, xpub: string): { xpubId: string; from: number } {
  const id = xpubId(xpub);
  const hint = claimFrom.get(`${environment}:${id}`) ?? { next: 0, claims: 0 };
  claimFrom.set(`${environment}:${id}`, hint);
  hint.claims += 1;
  return { xpubId: id, from: hint.claims % FULL_SCAN_EVERY === 0 ? 0 : hint.next };
}

/** A claim of `index` made elsewhere (a create's own statement): the next one starts past it. */
export function claimed(environment: Environment, xpub: string, index: number): void {
  const hint = claimFrom.get(`${environment}:${xpubId(xpub)}`);
  if (hint) hint.next = Math.max(hint.next, index + 1);
}

/**
 * The first pooled index of the environment and key (parameters named as SQL text) at or past `from`, locked for the
 * claiming transaction and skipping those others hold; `also`: a further condition (a create's own statement).
 */
export const nextPooled = (environment: string, xpubId: string, from: string, also = 'true') =>
  `SELECT hd_index FROM hd_address_pool WHERE environment = ${environment} AND xpub_id = ${xpubId} AND hd_index >= ${from} AND ${also} ORDER BY hd_index LIMIT 1 FOR UPDATE SKIP LOCKED`;

/** The next address for a managed wallet or deposit address: a pooled one, or one derived now. */
export async function claimAddress(em: EntityManager, environment: Environment, xpub: string): Promise<ClaimedAddress> {
  const { xpubId: id, from } = claimStart(environment, xpub);
  const claim = async (from: number) => {
    const rows: { hd_index: number; address: `0x${string}` }[] = await em.query(
      planOnce(`WITH claimed AS (
         DELETE FROM hd_address_pool WHERE hd_index = (
           ${nextPooled('$1', '$2', '$3')})
         RETURNING hd_index, address)
       SELECT hd_index, address FROM claimed`),
      [environment, id, from],
    );
    return rows[0];
  };
  // Nothing past the hint: a row before it (left by a rolled-back create) is still looked for.
  const row = (await claim(from)) ?? (from > 0 ? await claim(0) : undefined);
  if (row) {
    claimed(environment, xpub, row.hd_index);
    return { index: row.hd_index, address: row.address };
  }
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
