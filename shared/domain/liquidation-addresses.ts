import { randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import type { Unit } from '../db/unit-of-work.js';
import { findScoped } from '../db/pagination.js';
import { walletOf } from '../chain/hd-wallet.js';
import { claimAddress } from '../chain/address-pool.js';
import type { Chain } from './chains.js';
import type { EventScope } from './events.js';
import { issuedBlock } from './confirmations.js';
import { momoServes, requireLiveProvider } from '../providers/live-rails.js';
import { loadActiveBeneficiary } from './beneficiaries.js';
import { assertActiveCustomer } from './customers.js';
import { rampCorridor } from './quotes.js';
import { LIQUIDATION_ADDRESS_MACHINE, type RecordStatus } from './machines.js';
import { insertCreated, NOW, transition } from './transition.js';
import { byIdInScope, planOnce } from '../db/prepared-client.js';

// Liquidation addresses (CONTRACT section 16): a permanent deposit address tied to a beneficiary, HD-derived from the
// environment's xpub like a settlement's (the web process never holds a seed). The chain watcher matches it in the
// same one query as every other deposit address; each transfer to it becomes an off-ramp (liquidation-transfers.ts).

type Queryable = Pick<DataSource | EntityManager, 'query'>;

export interface LiquidationAddressRow {
  id: string;
  business_id: string;
  environment: 'sandbox' | 'live';
  chain: Chain;
  address: string;
  hd_index: number;
  beneficiary_id: string;
  customer_id: string | null;
  external_reference: string | null;
  status: RecordStatus;
  archived_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export const LIQUIDATION_ADDRESS_COLUMNS = `l.id, l.business_id, l.environment, l.chain, l.address, l.hd_index, l.beneficiary_id, l.customer_id, l.external_reference,
  l.status, l.archived_at, l.created_at, l.updated_at`;

export function liquidationAddressView(row: LiquidationAddressRow): Record<string, unknown> {
  return {
    id: row.id,
    chain: row.chain,
    asset: 'USDC',
    address: row.address,
    beneficiary_id: row.beneficiary_id,
    customer_id: row.customer_id,
    external_reference: row.external_reference,
    status: row.status,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export function findLiquidationAddress(q: Queryable, scope: EventScope, id: string, lock = false): Promise<LiquidationAddressRow> {
  return findScoped(q, { from: 'liquidation_addresses l', columns: LIQUIDATION_ADDRESS_COLUMNS, resource: 'liquidation address' }, scope, id, lock);
}

/** For jobs and the watcher, which carry ids only. */
export async function loadLiquidationAddress(q: Queryable, id: string, lock = false): Promise<LiquidationAddressRow | undefined> {
  return ((await q.query(`SELECT ${LIQUIDATION_ADDRESS_COLUMNS} FROM liquidation_addresses l WHERE l.id = $1${lock ? ' FOR SHARE' : ''}`, [id])) as LiquidationAddressRow[])[0];
}

export interface CreateLiquidationAddressInput {
  chain: Chain;
  beneficiary_id: string;
  customer_id?: string;
  external_reference?: string;
}

/**
 * Live: every transfer will pay this beneficiary, so its corridor needs a live provider (on its network, where MTN
 * MoMo serves the currency), as a live quote's does; else 422 unsupported_corridor `no_live_provider`.
 */
async function requireLivePayout(em: EntityManager, config: Config, scope: EventScope, id: string, beneficiary: { currency: string; payment_method: string }): Promise<void> {
  const corridor = rampCorridor(config, 'live', beneficiary.currency, beneficiary.payment_method, 'offramp');
  if (corridor.payment_method !== 'mobile_money' || !momoServes(config, beneficiary.currency)) return;
  const { details } = await loadActiveBeneficiary(em, config.encryptionKeys, scope, id);
  requireLiveProvider(config, beneficiary.currency, corridor.payment_method, details.mobile_network);
}

/**
 * A new address at the next HD index, for an active beneficiary (and customer, when named) of this business and
 * environment, whose corridor a live provider serves (live). Live: the chain head is recorded as it is issued, where the
 * watcher's first scan may have to start.
 */
export async function createLiquidationAddress(unit: Unit, config: Config, scope: EventScope, input: CreateLiquidationAddressInput): Promise<LiquidationAddressRow> {
  const { xpub } = walletOf(config, scope.environment, 'Live liquidation addresses');
  const [beneficiary]: { status: string; currency: string; payment_method: string }[] = await unit.em.query(
    planOnce(`SELECT status, currency, payment_method FROM beneficiaries WHERE ${byIdInScope()} FOR SHARE`), [input.beneficiary_id, scope.businessId, scope.environment],
  );
  if (!beneficiary) throw new AppError('not_found', 'No such beneficiary.', { param: 'beneficiary_id' });
  if (beneficiary.status !== 'active') throw new AppError('resource_archived', 'This beneficiary is archived and cannot be paid.', { beneficiary_id: input.beneficiary_id });
  if (scope.environment === 'live') await requireLivePayout(unit.em, config, scope, input.beneficiary_id, beneficiary);
  if (input.customer_id !== undefined) await assertActiveCustomer(unit.em, scope, input.customer_id);
  const block = await issuedBlock(config, scope, input.chain);
  const { index, address } = await claimAddress(unit.em, scope.environment, xpub);
  const id = randomUUID();
  const [row] = await insertCreated<RecordStatus, LiquidationAddressRow>(unit, LIQUIDATION_ADDRESS_MACHINE, scope, 'active', {
    text: `INSERT INTO liquidation_addresses AS l (id, business_id, environment, chain, address, hd_index, beneficiary_id, customer_id, external_reference, status, issued_block)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'active', $10) RETURNING ${LIQUIDATION_ADDRESS_COLUMNS}`,
    params: [id, scope.businessId, scope.environment, input.chain, address, index, input.beneficiary_id, input.customer_id ?? null,
      input.external_reference ?? null, block?.toString() ?? null],
    prepared: true,
    ids: [id],
  }, liquidationAddressView);
  return row;
}

/** Archived for good; archiving it again returns it as it is. Transfers that still arrive go back to their senders. */
export async function archiveLiquidationAddress(unit: Unit, scope: EventScope, id: string): Promise<LiquidationAddressRow> {
  const address = await findLiquidationAddress(unit.em, scope, id);
  await transition(unit, LIQUIDATION_ADDRESS_MACHINE, { scope, id, to: 'archived', expected: address.status, set: { archived_at: NOW }, view: () => ({}) });
  return findLiquidationAddress(unit.em, scope, id);
}
