import { randomBytes, randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import { AppError } from '../errors.js';
import { updateReturning, type Unit } from '../db/unit-of-work.js';
import { findScoped } from '../db/pagination.js';
import { openJson, sealJson, type MasterKey } from '../crypto/envelope.js';
import { rowAad, sealedColumnList, sealedFromRow, sealedValues } from '../crypto/sealed-columns.js';
import type { EventScope } from '../domain/events.js';
import { EVENT_TYPES, WEBHOOK_ENDPOINT_MACHINE, WEBHOOK_ENDPOINT_STATUSES } from '../domain/machines.js';
import { NOW, transition } from '../domain/transition.js';
import { planOnce } from '../db/prepared-client.js';

// Webhook endpoints (CONTRACT section 10): where a business wants its events, which ones, and the secrets deliveries
// are signed with. A secret is shown once, at creation or rotation, and kept sealed like beneficiary details; after a
// rotation the old one keeps signing beside the new for 24 h (Standard Webhooks allows several signatures).

type Queryable = Pick<DataSource | EntityManager, 'query'>;

export const MAX_ENDPOINTS = 16;
export const ROTATION_OVERLAP_HOURS = 24;
export const ENDPOINT_STATUSES = WEBHOOK_ENDPOINT_STATUSES;
export type EndpointStatus = (typeof ENDPOINT_STATUSES)[number];

export interface EndpointRow {
  id: string;
  business_id: string;
  environment: 'sandbox' | 'live';
  url: string;
  description: string | null;
  events: string[] | null;
  status: EndpointStatus;
  failing_since: Date | null;
  disabled_reason: string | null;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

export const ENDPOINT_COLUMNS = 'w.id, w.business_id, w.environment, w.url, w.description, w.events, w.status, w.failing_since, w.disabled_reason, w.created_at, w.updated_at, w.deleted_at';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function endpointView(row: EndpointRow, secret?: string): Record<string, unknown> {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    events: row.events ?? ['*'],
    status: row.status,
    failing_since: iso(row.failing_since),
    disabled_reason: row.disabled_reason,
    ...(secret ? { secret } : {}),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/** The event filters a business may name: an event type, a resource's wildcard (`transaction.*`), or `*`. */
export const EVENT_FILTERS: readonly string[] = ['*', ...new Set(EVENT_TYPES.map((t) => `${t.split('.')[0]}.*`)), ...EVENT_TYPES];

/** The filter as stored: null for every type. Unknown types are 400, naming the first. */
export function eventFilter(events: string[] | undefined): string[] | null {
  if (!events) return null;
  const unknown = events.find((e) => !EVENT_FILTERS.includes(e));
  if (unknown !== undefined) {
    throw AppError.invalid(`"${unknown}" is not an event type or a wildcard of one.`, [{ path: 'events', in: 'body', message: `${JSON.stringify(unknown)} is not an event type` }]);
  }
  return events.includes('*') ? null : [...new Set(events)];
}

/** `whsec_` and 24 random bytes in base64, the form the standardwebhooks package reads. */
function newSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

const SECRETS = 'webhook_secrets';

async function addSecret(unit: Unit, keys: readonly MasterKey[], endpoint: { id: string; business_id: string; environment: string }): Promise<string> {
  const id = randomUUID();
  const secret = newSecret();
  const sealed = sealJson(secret, keys, rowAad(SECRETS, 'secret', { id, business_id: endpoint.business_id, environment: endpoint.environment }));
  await unit.em.query(
    `INSERT INTO webhook_secrets (id, endpoint_id, business_id, environment, ${sealedColumnList('secret')}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [id, endpoint.id, endpoint.business_id, endpoint.environment, ...sealedValues(sealed)],
  );
  return secret;
}

/**
 * The secrets that sign a delivery now (the current one, and a rotated one until it expires), read in the same
 * statement as what they sign: a query joins them with this (its endpoint as `w`), one row per secret, adds
 * SIGNING_SECRET_COLUMNS and orders its rows by SECRETS_NEWEST_FIRST.
 */
export const LIVE_SECRETS_JOIN = `LEFT JOIN webhook_secrets s ON s.endpoint_id = w.id AND (s.expires_at IS NULL OR s.expires_at > now())`;
export const SIGNING_SECRET_COLUMNS = `s.id AS secret_row_id, s.business_id AS secret_business_id, s.environment AS secret_environment, ${sealedColumnList('secret')}`;
export const SECRETS_NEWEST_FIRST = 's.created_at DESC';

/** The secrets of rows read with LIVE_SECRETS_JOIN (newest first), opened, in their order (none when the join found none). */
export function signingSecrets(rows: Record<string, unknown>[], keys: readonly MasterKey[]): string[] {
  return rows.filter((r) => r.secret_row_id !== null)
    .map((r) => openJson<string>(sealedFromRow(r, 'secret'), keys, rowAad(SECRETS, 'secret', { id: r.secret_row_id as string, business_id: r.secret_business_id as string, environment: r.secret_environment as string })));
}

export interface CreateEndpointInput {
  url: string;
  events?: string[];
  description?: string;
}

/** A new endpoint (its URL already checked by the caller) and its secret, shown this once. At most 16 per environment. */
export async function createEndpoint(unit: Unit, keys: readonly MasterKey[], scope: EventScope, url: URL, input: CreateEndpointInput): Promise<{ row: EndpointRow; secret: string }> {
  const events = eventFilter(input.events);
  // Creations in one environment take turns, so the count below cannot be raced past the limit.
  await unit.em.query(`SELECT pg_advisory_xact_lock(hashtext('webhook_endpoints:' || $1 || ':' || $2))`, [scope.businessId, scope.environment]);
  const [{ n }]: { n: number }[] = await unit.em.query(
    `SELECT count(*)::int AS n FROM webhook_endpoints WHERE business_id = $1 AND environment = $2 AND status <> 'deleted'`, [scope.businessId, scope.environment],
  );
  if (n >= MAX_ENDPOINTS) throw AppError.invalidState(`An environment has at most ${MAX_ENDPOINTS} webhook endpoints; delete one first.`, { limit: MAX_ENDPOINTS });
  const rows: EndpointRow[] = await unit.em.query(
    `INSERT INTO webhook_endpoints AS w (id, business_id, environment, url, description, events) VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${ENDPOINT_COLUMNS}`,
    [randomUUID(), scope.businessId, scope.environment, url.toString(), input.description ?? null, events],
  );
  const secret = await addSecret(unit, keys, rows[0]);
  return { row: rows[0], secret };
}

export function findEndpoint(q: Queryable, scope: EventScope, id: string, lock = false): Promise<EndpointRow> {
  return findScoped<EndpointRow>(q, { from: 'webhook_endpoints w', columns: ENDPOINT_COLUMNS, resource: 'webhook endpoint' }, scope, id, lock).then((row) => {
    if (row.status === 'deleted') throw AppError.notFound('webhook endpoint');
    return row;
  });
}

/** DELETE: no more deliveries (those pending are cancelled when their turn comes); its history stays. */
export async function deleteEndpoint(unit: Unit, scope: EventScope, id: string): Promise<EndpointRow> {
  const endpoint = await findEndpoint(unit.em, scope, id, true);
  const moved = await transition<EndpointStatus, EndpointRow>(unit, WEBHOOK_ENDPOINT_MACHINE, { scope, id, to: 'deleted', expected: endpoint.status, set: { deleted_at: NOW }, reason: 'deleted', view: () => ({}) });
  return moved!.row;
}

/** A new secret, shown once; the one it replaces keeps signing for 24 h, an older one stops at once. */
export async function rotateSecret(unit: Unit, keys: readonly MasterKey[], scope: EventScope, id: string): Promise<{ row: EndpointRow; secret: string }> {
  await findEndpoint(unit.em, scope, id, true);
  // The secret in use keeps signing for 24 h; one rotated out earlier stops now, so a delivery carries two signatures at most.
  await unit.em.query(
    `UPDATE webhook_secrets SET expires_at = CASE WHEN expires_at IS NULL THEN now() + make_interval(hours => $2) ELSE least(expires_at, now()) END
      WHERE endpoint_id = $1 AND (expires_at IS NULL OR expires_at > now())`,
    [id, ROTATION_OVERLAP_HOURS],
  );
  const [row] = await updateReturning<EndpointRow>(unit.em, `UPDATE webhook_endpoints w SET updated_at = now() WHERE id = $1 RETURNING ${ENDPOINT_COLUMNS}`, [id]);
  return { row, secret: await addSecret(unit, keys, row) };
}
