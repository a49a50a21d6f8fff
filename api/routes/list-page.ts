import type { DataSource, EntityManager } from 'typeorm';
import { pageSql, toPage, type Page, type PageQuery } from '../pagination.js';

export interface ListSpec {
  /** `SELECT <columns>` of the rows the view reads. */
  columns: string;
  /** The FROM clause body, e.g. `customers c JOIN wallets w ON ...`. */
  from: string;
  /** Alias of the table whose (created_at, id) orders the list. */
  alias: string;
  /** Always business_id and environment first. */
  where: string[];
  params: unknown[];
}

/** One page of a list: pageSql's keyset query with the FROM clause put in, then toPage's envelope. */
export async function listPage<R extends { id: string; cursor_ts: string }, T>(
  db: DataSource | EntityManager,
  spec: ListSpec,
  query: PageQuery,
  view: (row: R) => T,
): Promise<Page<T>> {
  const built = pageSql(spec.columns, spec.where, spec.params, query, spec.alias);
  // pageSql renders `<select>, <alias>.created_at::text AS cursor_ts WHERE ...` and has no FROM slot of its own.
  const sql = built.sql.replace(' AS cursor_ts WHERE ', ` AS cursor_ts FROM ${spec.from} WHERE `);
  const rows: R[] = await db.query(sql, built.params);
  return toPage(rows, built.limit, view);
}
