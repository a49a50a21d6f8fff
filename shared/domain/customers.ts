import type { DataSource, EntityManager } from 'typeorm';
import { AppError } from '../errors.js';
import { assertActiveCustomer } from './customer-status.js';
import { walletOf } from '../chain/hd-wallet.js';
import { claimAddress, claimed, claimStart, nextPooled } from '../chain/address-pool.js';
import type { Config } from '../config.js';
import type { EventScope } from './events.js';
import { supportedChains, type WalletRow } from './wallets.js';
import { byIdInScope, planOnce } from '../db/prepared-client.js';

/** The chain a managed wallet reports as its own; its address serves every supported chain. */
export const MANAGED_WALLET_HOME_CHAIN = 'base';

export interface CustomerRow {
  id: string;
  external_reference: string;
  display_name: string | null;
  metadata: Record<string, string>;
  status: 'active' | 'archived';
  archived_at: Date | null;
  created_at: Date;
  updated_at: Date;
  wallet_id: string;
  wallet_address: string;
  wallet_chain: WalletRow['chain'];
  wallet_ownership_status: WalletRow['ownership_status'];
  wallet_status: WalletRow['status'];
}

export { assertActiveCustomer };

/** Columns and FROM clause of a customer with its managed wallet; `c` is the customer, `w` the wallet. */
export const CUSTOMER_COLUMNS = `c.id, c.external_reference, c.display_name, c.metadata, c.status, c.archived_at, c.created_at, c.updated_at,
  w.id AS wallet_id, w.address AS wallet_address, w.chain AS wallet_chain, w.ownership_status AS wallet_ownership_status, w.status AS wallet_status`;
// The managed wallet is found for each customer by its unique index, whatever the planner knows: LIMIT 1 keeps the
// subquery a lookup per customer row. Joined plainly, a planner without statistics (a table never analyzed) read the
// whole index for every customer of a page: 2,800 buffers for 25 rows with 150 customers, growing with the table.
// A change to the managed wallet moves its customer's version too (migration 1764900000000): the customer's row
// version names what its view reads.
export const CUSTOMER_FROM = `customers c JOIN LATERAL (SELECT * FROM wallets w WHERE w.customer_id = c.id AND w.type = 'managed_wallet' LIMIT 1) w ON true`;

export function customerView(row: CustomerRow): Record<string, unknown> {
  return {
    id: row.id,
    external_reference: row.external_reference,
    display_name: row.display_name,
    metadata: row.metadata,
    status: row.status,
    wallet: {
      id: row.wallet_id,
      type: 'managed_wallet',
      address: row.wallet_address,
      asset: 'USDC',
      supported_chains: supportedChains({ type: 'managed_wallet', chain: row.wallet_chain }),
      ownership_status: row.wallet_ownership_status,
      status: row.wallet_status,
    },
    archived_at: row.archived_at ? row.archived_at.toISOString() : null,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export async function findCustomer(db: DataSource | EntityManager, scope: EventScope, id: string): Promise<CustomerRow> {
  const rows: CustomerRow[] = await db.query(
    planOnce(`SELECT ${CUSTOMER_COLUMNS} FROM ${CUSTOMER_FROM} WHERE ${byIdInScope('c')}`),
    [id, scope.businessId, scope.environment],
  );
  if (!rows[0]) throw AppError.notFound('customer');
  return rows[0];
}

/**
 * An active wallet of the business ($1, $2) at `address` (lowercased): found by the address's own index. As plain
 * conditions, a plan made without statistics walked the business's wallets (8,568 of them in the benchmark, 13 ms).
 */
const HELD_BY_BUSINESS = (address: string) => `lower(address) = ${address} AND (business_id = $1 AND environment = $2 AND status = 'active') IS TRUE`;

/** Addresses an index may be skipped for before something is badly wrong (each skip is one registered external wallet). */
const MAX_INDEX_SKIPS = 16;

/**
 * Derives the customer's managed wallet at the next HD index. An index whose address this business already holds
 * as an active external wallet (registered before the platform derived it; the sandbox seed is public) is skipped
 * for good: one address is never two wallets, on any chain.
 */
async function insertManagedWallet(em: EntityManager, xpub: string, scope: EventScope, customerId: string): Promise<void> {
  for (let attempt = 0; attempt < MAX_INDEX_SKIPS; attempt++) {
    const { index, address } = await claimAddress(em, scope.environment, xpub);
    const inserted: unknown[] = await em.query(
      `INSERT INTO wallets (business_id, environment, customer_id, type, chain, address, hd_index, ownership_status)
       SELECT $1, $2, $3, 'managed_wallet', $4, $5, $6, 'managed'
        WHERE NOT EXISTS (SELECT 1 FROM wallets WHERE ${HELD_BY_BUSINESS('lower($5)')})
       RETURNING id`,
      [scope.businessId, scope.environment, customerId, MANAGED_WALLET_HOME_CHAIN, address, index],
    );
    if (inserted.length) return;
  }
  throw new Error(`no free managed wallet address after ${MAX_INDEX_SKIPS} HD indexes`);
}

export interface CreateCustomerInput {
  external_reference: string;
  display_name?: string;
  metadata?: Record<string, string>;
}

/**
 * Creates the customer and its managed wallet in the caller's transaction, or returns the customer that already
 * holds this external_reference. The unique index decides concurrent creates: the loser's insert waits for the
 * winner's commit, does nothing, and reads the winner's row, so there is never a second wallet.
 */
export async function createCustomer(
  em: EntityManager,
  wallets: Config['wallets'],
  scope: EventScope,
  input: CreateCustomerInput,
): Promise<{ created: boolean; customer: CustomerRow }> {
  const { xpub } = walletOf({ wallets }, scope.environment, 'Live managed wallets');
  const start = claimStart(scope.environment, xpub);
  // One statement: the customer, a pooled address claimed for it (one no active wallet of the business holds), its
  // wallet, and the answer's row. A reference already used inserts nothing (read below); an empty pool past the
  // claim's start or a held address leaves the customer without a wallet, given one by the fuller path next.
  const [row]: (CustomerRow & { hd_index: number | null })[] = await em.query(
    planOnce(`WITH c AS (
       INSERT INTO customers (business_id, environment, external_reference, display_name, metadata) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (business_id, environment, external_reference) DO NOTHING
       RETURNING id, external_reference, display_name, metadata, status, archived_at, created_at, updated_at),
     claimed AS (
       DELETE FROM hd_address_pool p WHERE p.hd_index = (
         ${nextPooled('$2', '$6', '$7', 'EXISTS (SELECT 1 FROM c)')})
         AND NOT EXISTS (SELECT 1 FROM wallets WHERE ${HELD_BY_BUSINESS('lower(p.address)')})
       RETURNING p.hd_index, p.address),
     w AS (
       INSERT INTO wallets (business_id, environment, customer_id, type, chain, address, hd_index, ownership_status)
       SELECT $1, $2, c.id, 'managed_wallet', $8, claimed.address, claimed.hd_index, 'managed' FROM c, claimed
       RETURNING id, address, chain, ownership_status, status, hd_index)
     SELECT ${CUSTOMER_COLUMNS}, w.hd_index FROM c LEFT JOIN w ON true`),
    [scope.businessId, scope.environment, input.external_reference, input.display_name ?? null, JSON.stringify(input.metadata ?? {}),
      start.xpubId, start.from, MANAGED_WALLET_HOME_CHAIN],
  );
  if (row?.wallet_id) {
    claimed(scope.environment, xpub, row.hd_index!);
    const { hd_index: _index, ...customer } = row;
    return { created: true, customer };
  }
  if (row) {
    await insertManagedWallet(em, xpub, scope, row.id);
    return { created: true, customer: await findCustomer(em, scope, row.id) };
  }
  const existing: CustomerRow[] = await em.query(
    `SELECT ${CUSTOMER_COLUMNS} FROM ${CUSTOMER_FROM} WHERE c.business_id = $1 AND c.environment = $2 AND c.external_reference = $3`,
    [scope.businessId, scope.environment, input.external_reference],
  );
  return { created: false, customer: existing[0] };
}
