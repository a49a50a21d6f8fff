// Beneficiaries: reusable payout destinations. `details` are checked against the corridor, sealed at rest
// (shared/crypto/envelope.ts) and only ever leave this module redacted, except to loadActiveBeneficiary's and joinedBeneficiary's callers.
import { randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import { assertActiveCustomer } from './customers.js';
import { AppError } from '../errors.js';
import { openJson, sealJson, type MasterKey } from '../crypto/envelope.js';
import { rowAad, sealedColumnList, sealedFromRow, sealedValues } from '../crypto/sealed-columns.js';
import type { Environment } from './chains.js';
import { getCorridor, requireCorridor, type Corridor, type PaymentMethod } from './corridors.js';
import { checkDetails, redactDetails, redactValue, type Details } from './corridor-details.js';
import type { Unit } from '../db/unit-of-work.js';
import { NOW, transition } from './transition.js';
import { BENEFICIARY_STATUS_MACHINE } from './machines.js';
import { byIdInScope, planOnce } from '../db/prepared-client.js';
import { joinedColumns } from '../db/joined-columns.js';

export interface Tenant {
  businessId: string;
  environment: Environment;
}

type Queryable = Pick<DataSource | EntityManager, 'query'>;

export interface BeneficiaryRow {
  id: string;
  business_id: string;
  environment: Environment;
  customer_id: string | null;
  currency: string;
  payment_method: PaymentMethod;
  account_holder_name: string;
  label: string | null;
  external_reference: string | null;
  status: 'active' | 'archived';
  created_at: Date;
  updated_at: Date;
  archived_at: Date | null;
}

export interface CreateBeneficiaryInput {
  currency: string;
  payment_method: string;
  account_holder_name: string;
  details: unknown;
  label?: string | null;
  external_reference?: string;
  customer_id?: string;
}

/** What a quote or payout gets: the plaintext details. Never log, return or enqueue them. */
export interface ActiveBeneficiary {
  beneficiary: BeneficiaryRow;
  corridor: Corridor;
  details: Details;
}

const TABLE = 'beneficiaries';
const SEALED = 'details';
export const BENEFICIARY_COLUMNS = 'id, business_id, environment, customer_id, currency, payment_method, account_holder_name, label, external_reference, status, created_at, updated_at, archived_at';
const SCOPED = byIdInScope();

function aad(row: { id: string; business_id: string; environment: string }): string {
  return rowAad(TABLE, SEALED, row);
}

type SealedRow = BeneficiaryRow & Record<string, unknown>;

async function findRow(q: Queryable, tenant: Tenant, id: string, opts: { sealed?: boolean; forUpdate?: boolean } = {}): Promise<SealedRow | null> {
  const rows = await q.query(
    planOnce(`SELECT ${BENEFICIARY_COLUMNS}${opts.sealed ? `, ${sealedColumnList(SEALED)}` : ''} FROM ${TABLE} WHERE ${SCOPED}${opts.forUpdate ? ' FOR UPDATE' : ''}`),
    [id, tenant.businessId, tenant.environment],
  );
  return rows[0] ?? null;
}

function withoutSealed(row: SealedRow): BeneficiaryRow {
  const { details_key_id: _k, details_wrapped_key: _w, details_iv: _i, details_tag: _t, details_ciphertext: _c, ...beneficiary } = row;
  return beneficiary as BeneficiaryRow;
}

function decryptDetails(row: SealedRow, keys: readonly MasterKey[]): Details {
  return openJson<Details>(sealedFromRow(row, SEALED), keys, aad(row));
}

/** Redacted for responses; a corridor that has since left the registry gets every value redacted. */
function redactedFor(row: BeneficiaryRow, details: Details): Details {
  const corridor = getCorridor(row.currency, row.payment_method);
  if (corridor) return redactDetails(corridor, details);
  return Object.fromEntries(Object.entries(details).map(([k, v]) => [k, redactValue(v)]));
}

export async function createBeneficiary(
  ds: Queryable,
  keys: readonly MasterKey[],
  tenant: Tenant,
  input: CreateBeneficiaryInput,
): Promise<{ beneficiary: BeneficiaryRow; details: Details }> {
  // The currency is matched, and stored, upper-cased: `kes` is KES.
  const corridor = requireCorridor(input.currency.toUpperCase(), input.payment_method, 'offramp');
  const details = checkDetails(corridor, input.details);
  if (input.customer_id) await assertActiveCustomer(ds, tenant, input.customer_id);
  const id = randomUUID();
  const sealed = sealJson(details, keys, aad({ id, business_id: tenant.businessId, environment: tenant.environment }));
  const rows: BeneficiaryRow[] = await ds.query(
    `INSERT INTO ${TABLE} (id, business_id, environment, customer_id, currency, payment_method, account_holder_name, label, external_reference,
       ${sealedColumnList(SEALED)})
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING ${BENEFICIARY_COLUMNS}`,
    [
      id, tenant.businessId, tenant.environment, input.customer_id ?? null, corridor.currency, corridor.payment_method,
      input.account_holder_name, input.label ?? null, input.external_reference ?? null, ...sealedValues(sealed),
    ],
  );
  return { beneficiary: rows[0], details: redactDetails(corridor, details) };
}

/** One beneficiary with its details redacted; 404 outside this business and environment. */
export async function getBeneficiary(ds: Queryable, keys: readonly MasterKey[], tenant: Tenant, id: string): Promise<{ beneficiary: BeneficiaryRow; details: Details }> {
  const row = await findRow(ds, tenant, id, { sealed: true });
  if (!row) throw AppError.notFound('beneficiary');
  return { beneficiary: withoutSealed(row), details: redactedFor(row, decryptDetails(row, keys)) };
}

/** Sets or clears the label of an active beneficiary; an archived one is read-only (409 resource_archived). */
export async function updateBeneficiaryLabel(ds: Queryable, tenant: Tenant, id: string, label: string | null): Promise<BeneficiaryRow> {
  // TypeORM answers an UPDATE with [rows, affected].
  const [rows]: [BeneficiaryRow[], number] = await ds.query(
    `UPDATE ${TABLE} SET label = $4, updated_at = now() WHERE ${SCOPED} AND status = 'active' RETURNING ${BENEFICIARY_COLUMNS}`,
    [id, tenant.businessId, tenant.environment, label],
  );
  if (rows[0]) return rows[0];
  const existing = await findRow(ds, tenant, id);
  if (!existing) throw AppError.notFound('beneficiary');
  throw new AppError('resource_archived', 'This beneficiary is archived and can no longer be changed.', { archived_at: existing.archived_at?.toISOString() });
}

/** Archives (status archived, archived_at set). Archiving an archived beneficiary returns it unchanged. */
export async function archiveBeneficiary(unit: Unit, tenant: Tenant, id: string): Promise<BeneficiaryRow> {
  // Through the one transition function; an already archived beneficiary is returned as it is.
  await transition(unit, BENEFICIARY_STATUS_MACHINE, { scope: tenant, id, to: 'archived', expected: 'active', set: { archived_at: NOW }, view: () => ({}) });
  const row = await findRow(unit.em, tenant, id);
  if (!row) throw AppError.notFound('beneficiary');
  return row;
}

/** A beneficiary's columns, sealed details included, read beside another table's (`b` joined): `beneficiary__<column>`. */
export const JOINED_BENEFICIARY = joinedColumns<SealedRow>('beneficiary', 'b', `${BENEFICIARY_COLUMNS}, ${sealedColumnList(SEALED)}`);

/**
 * The beneficiary read with JOINED_BENEFICIARY, as loadActiveBeneficiary answers it for a payout under way
 * (archived or not); undefined when the join found none.
 */
export function joinedBeneficiary(row: Record<string, unknown>, keys: readonly MasterKey[]): ActiveBeneficiary | undefined {
  const own = JOINED_BENEFICIARY.take(row);
  if (!own) return undefined;
  return { beneficiary: withoutSealed(own), corridor: requireCorridor(own.currency, own.payment_method, 'offramp'), details: decryptDetails(own, keys) };
}

/**
 * For quotes and payouts: the beneficiary with its plaintext details and corridor. 404 outside this tenant,
 * 409 resource_archived once archived, 422 unsupported_corridor if its corridor has left the registry.
 * Pass the transaction's EntityManager and `forUpdate` to hold the row against a concurrent archive.
 */
export async function loadActiveBeneficiary(
  q: Queryable,
  keys: readonly MasterKey[],
  tenant: Tenant,
  id: string,
  opts: { forUpdate?: boolean; allowArchived?: boolean } = {},
): Promise<ActiveBeneficiary> {
  const row = await findRow(q, tenant, id, { sealed: true, forUpdate: opts.forUpdate });
  if (!row) throw AppError.notFound('beneficiary');
  // A payout already under way still reaches the beneficiary it was started for, archived since or not.
  if (row.status === 'archived' && !opts.allowArchived) throw new AppError('resource_archived', 'This beneficiary is archived and cannot be used.', { beneficiary_id: id });
  const corridor = requireCorridor(row.currency, row.payment_method, 'offramp');
  return { beneficiary: withoutSealed(row), corridor, details: decryptDetails(row, keys) };
}
