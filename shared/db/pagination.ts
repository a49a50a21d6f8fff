import type { DataSource, EntityManager } from 'typeorm';
import { AppError } from '../errors.js';
import { byIdInScope, planOnce } from './prepared-client.js';

export interface PageQuery {
  limit?: number;
  starting_after?: string;
}

export interface Page<T> {
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}

interface Cursor {
  t: string; // created_at, UTC ISO 8601 with microseconds
  i: string; // id
}

// Rendered by PostgreSQL in one fixed format (whatever the session's DateStyle), microseconds kept.
const CURSOR_TS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The text names a real instant: `2026-02-30...` or hour 25 would pass the pattern and fail in PostgreSQL. */
function realInstant(t: string): boolean {
  const ms = Date.parse(t);
  return !Number.isNaN(ms) && new Date(ms).toISOString().slice(0, 23) === t.slice(0, 23) && t.slice(0, 4) !== '0000';
}

/** Opaque cursor over (created_at, id), newest first. */
export function encodeCursor(createdAt: string, id: string): string {
  return Buffer.from(JSON.stringify({ t: createdAt, i: id } satisfies Cursor)).toString('base64url');
}

export function decodeCursor(raw: string): Cursor {
  try {
    const parsed = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Cursor;
    // Exactly what encodeCursor writes: PostgreSQL's timestamptz text and a canonical UUID.
    if (typeof parsed.t === 'string' && typeof parsed.i === 'string' && CURSOR_TS.test(parsed.t) && UUID_RE.test(parsed.i) && realInstant(parsed.t)) {
      return parsed;
    }
  } catch {
    // fall through
  }
  throw AppError.invalid('starting_after is not a cursor this API issued.', [{ path: 'starting_after', in: 'query', message: 'is not a valid cursor' }]);
}

export interface ListSpec {
  /** The selected columns, e.g. `c.id, c.external_reference, w.address`. */
  columns: string;
  /** The FROM clause body, e.g. `customers c JOIN wallets w ON ...`. */
  from: string;
  /** Alias of the table whose (created_at, id) orders the list. */
  alias: string;
  /** Conditions: always business_id and environment first. */
  where: string[];
  params: unknown[];
}

/**
 * A page's statement, prepared (planOnce) when it filters by nothing but the business and environment (and the
 * cursor): its one plan walks the list index, whatever the values. A filtered page (a status, a customer) is planned
 * for its values each time: a generic plan chosen without statistics may walk the business's whole list index to
 * find one customer's rows (prepared-client.ts).
 */
function pageText(spec: ListSpec, sql: string): string {
  return spec.where.length <= 2 ? planOnce(sql) : sql;
}

/** Keyset pagination, newest first, over (created_at, id) of `spec.alias`. */
export function pageSql(spec: ListSpec, query: PageQuery): { sql: string; params: unknown[]; limit: number } {
  const a = `${spec.alias}.`;
  const limit = query.limit ?? 25;
  const conditions = [...spec.where];
  const values = [...spec.params];
  if (query.starting_after) {
    const cursor = decodeCursor(query.starting_after);
    values.push(cursor.t, cursor.i);
    conditions.push(`(${a}created_at, ${a}id) < ($${values.length - 1}::timestamptz, $${values.length}::uuid)`);
  }
  values.push(limit + 1);
  const sql =
    `SELECT ${spec.columns}, to_char(${a}created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS cursor_ts FROM ${spec.from} WHERE ${conditions.join(' AND ')} ` +
    `ORDER BY ${a}created_at DESC, ${a}id DESC LIMIT $${values.length}`;
  return { sql, params: values, limit };
}

/** One page of a list: the keyset query, then the list envelope. */
export async function listPage<R extends { id: string; cursor_ts: string }, T>(
  db: DataSource | EntityManager,
  spec: ListSpec,
  query: PageQuery,
  view: (row: R) => T,
): Promise<Page<T>> {
  const built = pageSql(spec, query);
  const rows: R[] = await db.query(pageText(spec, built.sql), built.params);
  return toPage(rows, built.limit, view);
}

/** Cuts the extra row off and builds the list envelope. */
export function toPage<R extends { id: string; cursor_ts: string }, T>(rows: R[], limit: number, view: (row: R) => T): Page<T> {
  const hasMore = rows.length > limit;
  const kept = hasMore ? rows.slice(0, limit) : rows;
  const last = kept[kept.length - 1];
  return { data: kept.map(view), has_more: hasMore, next_cursor: hasMore && last ? encodeCursor(last.cursor_ts, last.id) : null };
}

/**
 * A list's WHERE: the business and environment first, then, for each filter the query gives, its condition
 * (`t.status = $`, completed with the parameter's number). Conditions are code, never the caller's text.
 */
export function scopedWhere(
  alias: string,
  scope: { businessId: string; environment: string },
  query: Record<string, unknown>,
  filters: readonly (readonly [string, string])[],
): Pick<ListSpec, 'where' | 'params'> {
  const where = [`${alias}.business_id = $1`, `${alias}.environment = $2`];
  const params: unknown[] = [scope.businessId, scope.environment];
  for (const [name, condition] of filters) {
    if (query[name] === undefined) continue;
    params.push(query[name]);
    where.push(`${condition}${params.length}`);
  }
  return { where, params };
}

/**
 * One row of a business environment by id (`from` is `table alias`, or a join whose `alias` owns business_id and environment),
 * locked FOR UPDATE when asked; 404 `not_found` naming `resource` otherwise.
 */
export async function findScoped<R>(
  db: Pick<DataSource | EntityManager, 'query'>,
  spec: { from: string; columns: string; resource: string; alias?: string },
  scope: { businessId: string; environment: string },
  id: string,
  lock = false,
): Promise<R> {
  const alias = spec.alias ?? spec.from.split(' ').pop();
  const rows: R[] = await db.query(
    planOnce(`SELECT ${spec.columns} FROM ${spec.from} WHERE ${byIdInScope(alias)}${lock ? ' FOR UPDATE' : ''}`),
    [id, scope.businessId, scope.environment],
  );
  if (!rows[0]) throw AppError.notFound(spec.resource);
  return rows[0];
}

/** The most rows one export answers (CONTRACT 16): CSV rows, so a journal entry's postings count one each. */
export const EXPORT_MAX_ROWS = 100_000;

/**
 * Every row of a list, newest first, for an export: keyset pages of `batch` rows one after another (never all of them
 * in memory), each row mapped to the rows it exports as (a journal entry: one per posting), at most EXPORT_MAX_ROWS of those.
 */
export async function* allRows<R extends { id: string; cursor_ts: string }, T>(
  db: DataSource | EntityManager,
  spec: ListSpec,
  expand: (rows: R[]) => Promise<T[]> | T[],
  batch = 1000,
): AsyncGenerator<T> {
  let after: string | undefined;
  let left = EXPORT_MAX_ROWS;
  while (left > 0) {
    const built = pageSql(spec, { limit: Math.min(batch, left), starting_after: after });
    const rows: R[] = await db.query(pageText(spec, built.sql), built.params);
    const kept = rows.slice(0, built.limit);
    for (const row of await expand(kept)) {
      if (left-- <= 0) return;
      yield row;
    }
    if (rows.length <= built.limit) return;
    const last = kept[kept.length - 1];
    after = encodeCursor(last.cursor_ts, last.id);
  }
}
