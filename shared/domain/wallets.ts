import type { DataSource, EntityManager } from 'typeorm';
import { assertActiveCustomer } from './customer-status.js';
import { AppError } from '../errors.js';
import { checksumAddress } from '../chain/address.js';
import { CHAINS, type Chain } from './chains.js';
import type { EventScope } from './events.js';
import type { Unit } from '../db/unit-of-work.js';
import { NOW, transition } from './transition.js';
import { WALLET_STATUS_MACHINE } from './machines.js';

export type WalletType = 'managed_wallet' | 'external_wallet';
export type { OwnershipStatus } from './machines.js';
import type { OwnershipStatus } from './machines.js';
import { byIdInScope, planOnce } from '../db/prepared-client.js';

export interface WalletRow {
  id: string;
  customer_id: string | null;
  customer_reference: string | null;
  type: WalletType;
  chain: Chain;
  address: string;
  label: string | null;
  ownership_status: OwnershipStatus;
  status: 'active' | 'archived';
  verified_at: Date | null;
  archived_at: Date | null;
  created_at: Date;
  updated_at: Date;
  /** A managed wallet's index under the xpub (its signer); never shown. */
  hd_index: number | null;
}

/** Columns and FROM clause of a wallet as the API shows it; `w` is the wallet, `c` its customer. */
export const WALLET_COLUMNS = `w.id, w.customer_id, c.external_reference AS customer_reference, w.type, w.chain, w.address, w.label,
  w.ownership_status, w.status, w.verified_at, w.archived_at, w.created_at, w.updated_at, w.hd_index`;
export const WALLET_FROM = `wallets w LEFT JOIN customers c ON c.id = w.customer_id`;

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** A managed wallet serves every chain from one address; an external wallet the chain it was registered on. */
export function supportedChains(row: Pick<WalletRow, 'type' | 'chain'>): Chain[] {
  return row.type === 'managed_wallet' ? [...CHAINS] : [row.chain];
}

export function walletView(row: WalletRow): Record<string, unknown> {
  return {
    id: row.id,
    type: row.type,
    chain: row.chain,
    supported_chains: supportedChains(row),
    asset: 'USDC',
    address: row.address,
    ownership_status: row.ownership_status,
    status: row.status,
    customer_id: row.customer_id,
    customer_reference: row.customer_reference,
    label: row.label,
    verified_at: iso(row.verified_at),
    archived_at: iso(row.archived_at),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/** The wallet in this business and environment, or 404. `lock`: a row lock for a state change ('update') or against one ('share'). */
export async function findWallet(db: DataSource | EntityManager, scope: EventScope, id: string, lock?: 'update' | 'share'): Promise<WalletRow> {
  const rows: WalletRow[] = await db.query(
    planOnce(`SELECT ${WALLET_COLUMNS} FROM ${WALLET_FROM} WHERE ${byIdInScope('w')}${lock ? ` FOR ${lock.toUpperCase()} OF w` : ''}`),
    [id, scope.businessId, scope.environment],
  );
  if (!rows[0]) throw AppError.notFound('wallet');
  return rows[0];
}

export function assertActive(wallet: Pick<WalletRow, 'id' | 'status'>): void {
  if (wallet.status !== 'active') throw new AppError('resource_archived', 'This wallet is archived.', { wallet_id: wallet.id });
}

/** The chain a balance or funding refers to: required for managed wallets, the wallet's own chain for external ones. */
export function resolveChain(wallet: WalletRow, requested: Chain | undefined, where: 'query' | 'body' = 'query'): Chain {
  if (wallet.type === 'managed_wallet') {
    if (!requested) throw AppError.invalid('chain is required for a managed wallet.', [{ path: 'chain', in: where, message: 'is required for a managed wallet' }]);
    return requested;
  }
  if (requested && requested !== wallet.chain) {
    throw AppError.invalid(`This external wallet is registered on ${wallet.chain}.`, [{ path: 'chain', in: where, message: `must be ${wallet.chain} for this wallet` }]);
  }
  return wallet.chain;
}

export interface RegisterWalletInput {
  address: string;
  chain: Chain;
  customer_id?: string;
  label?: string;
}

const ADDRESS_PROBLEMS = {
  not_an_address: 'is not a 20-byte hex EVM address',
  bad_checksum: 'fails its EIP-55 checksum (send it all lower-case, or with the correct mixed case)',
  zero_address: 'is the zero address',
};

function alreadyRegistered(walletId: string): AppError {
  return new AppError('wallet_already_registered', 'This address is already registered on this chain.', { wallet_id: walletId });
}

/** Registers an external wallet; an active wallet with the same address on that chain (or a managed one) is a 409. */
export async function registerExternalWallet(em: EntityManager, scope: EventScope, input: RegisterWalletInput): Promise<WalletRow> {
  const checked = checksumAddress(input.address);
  if ('problem' in checked) {
    throw AppError.invalid(`address ${ADDRESS_PROBLEMS[checked.problem]}.`, [{ path: 'address', in: 'body', message: ADDRESS_PROBLEMS[checked.problem] }]);
  }
  const params = [scope.businessId, scope.environment];
  if (input.customer_id) await assertActiveCustomer(em, scope, input.customer_id);
  // A managed wallet's one address serves every chain, so it conflicts whatever chain is asked for.
  const clash: { id: string }[] = await em.query(
    `SELECT id FROM wallets WHERE business_id = $1 AND environment = $2 AND status = 'active' AND lower(address) = lower($3)
        AND (chain = $4 OR type = 'managed_wallet') LIMIT 1`,
    [...params, checked.address, input.chain],
  );
  if (clash[0]) throw alreadyRegistered(clash[0].id);
  const inserted: { id: string }[] = await em.query(
    `INSERT INTO wallets (business_id, environment, customer_id, type, chain, address, label, ownership_status)
     VALUES ($1, $2, $3, 'external_wallet', $4, $5, $6, 'unverified')
     ON CONFLICT (business_id, environment, chain, lower(address)) WHERE status = 'active' DO NOTHING RETURNING id`,
    [...params, input.customer_id ?? null, input.chain, checked.address, input.label ?? null],
  );
  if (!inserted[0]) {
    // A concurrent registration won the race: answer as if it had come first.
    const winner: { id: string }[] = await em.query(
      `SELECT id FROM wallets WHERE business_id = $1 AND environment = $2 AND status = 'active' AND chain = $3 AND lower(address) = lower($4)`,
      [...params, input.chain, checked.address],
    );
    throw alreadyRegistered(winner[0]?.id ?? '');
  }
  return findWallet(em, scope, inserted[0].id);
}

/** Archives a wallet (idempotent: an archived wallet is returned as it is). */
export async function archiveWallet(unit: Unit, scope: EventScope, id: string): Promise<WalletRow> {
  const wallet = await findWallet(unit.em, scope, id, 'update');
  // A customer's managed wallet is its one reusable wallet: it lives and dies with the customer.
  if (wallet.type === 'managed_wallet') throw AppError.invalidState('A managed wallet belongs to its customer and cannot be archived on its own.', { wallet_id: wallet.id });
  if (wallet.status === 'archived') return wallet;
  await transition(unit, WALLET_STATUS_MACHINE, { scope, id, to: 'archived', expected: wallet.status, set: { archived_at: NOW }, view: () => ({}) });
  return findWallet(unit.em, scope, id);
}
