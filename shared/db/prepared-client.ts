import { createHash } from 'node:crypto';
import pg from 'pg';

/**
 * Named prepared statements for the statements of the hot path that ask for them (`planOnce`): PostgreSQL then
 * parses and plans each once per connection and reuses the plan (its generic plan, after five custom ones, when that
 * costs no more), instead of planning it on every call. Planning was a third of the statement time of a sandbox
 * off-ramp's lifecycle (pg_stat_statements with track_planning; docs/performance.md). The pool is given this class as
 * its `Client`, so TypeORM's queries are covered without their callers knowing.
 *
 * Only statements marked by `planOnce`, because a generic plan is chosen from estimates, not from the values: our
 * scoped reads (`id = ANY($1) AND business_id = $2 AND environment = $3`) got a generic plan that walked the
 * business's index and filtered by id when the table's statistics were stale, a plan that grows with the business.
 * A marked statement keys on its unique column alone for the index, so every plan of it is a key lookup.
 *
 * A prepared statement whose result lists columns by `*` (`RETURNING t.*`) is refused by PostgreSQL once a
 * release-phase migration adds a column to its table ("cached plan must not change result type", in every process
 * still running the old code). That text is then never prepared again by this process, and the statement that met it
 * is run again unnamed at once when it ran on its own (autocommit); inside a transaction the transaction is lost, and
 * `inUnit` runs its unit again (`isStalePlan`), as it does a deadlock's victim.
 *
 * A statement the connection lost (DEALLOCATE or DISCARD ALL run on it) is prepared again the same way.
 *
 * Left unnamed: a marked statement once `MAX_TEXTS` distinct texts have been named by the process, or once its
 * connection holds `MAX_PER_CONNECTION`. Off through the pooled URL (a transaction-mode pooler that does not keep
 * prepared statements: docs/pooler.md) unless `DATABASE_PREPARE=on`; `DATABASE_PREPARE=off` turns it off everywhere.
 */
const MAX_TEXTS = 2_000;
const MAX_PER_CONNECTION = 500;

/** Texts marked by planOnce, with their statement names (null: not to be prepared). */
const names = new Map<string, string | null>();

/** Marks a statement (its text, as sent) to be prepared once per connection; answers the text. */
export function planOnce(text: string): string {
  if (!names.has(text) && names.size < MAX_TEXTS) names.set(text, `rw_${createHash('sha1').update(text).digest('base64url').slice(0, 20)}`);
  return text;
}

/** PostgreSQL refused a prepared statement whose result's columns changed since it was prepared (a migration ran). */
function resultChanged(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | null;
  return e?.code === '0A000' && /cached plan must not change result type/.test(e.message ?? '');
}

/** The connection no longer holds a statement pg believed prepared (someone ran DEALLOCATE or DISCARD ALL on it). */
const statementLost = (err: unknown) => (err as { code?: string } | null)?.code === '26000';

/** A statement failed only because of how it was prepared: running it again (its unit of work, in a transaction) works. */
export function isStalePlan(err: unknown): boolean {
  return resultChanged(err) || statementLost(err);
}

type PgInternals = {
  connection: { parsedStatements: Record<string, string> };
  _txStatus: string | null;
  _activeQuery: unknown;
  _queryQueue: unknown[];
};

export class PreparingClient extends pg.Client {
  private prepared = 0;

  // pg's query() has many overloads; only (text, values[]) of a marked text becomes a named statement.
  override query(...args: any[]): any {
    const [text, values] = args;
    const name = args.length === 2 && typeof text === 'string' && Array.isArray(values) ? names.get(text) : undefined;
    if (!name) return (super.query as (...a: any[]) => any)(...args);
    const self = this as unknown as PgInternals;
    const known = self.connection.parsedStatements[name] !== undefined;
    if (!known && this.prepared >= MAX_PER_CONNECTION) return super.query(text, values);
    if (!known) this.prepared += 1;
    // Nothing before it on this connection and no transaction open: it runs on its own, so it may simply run again.
    const alone = self._txStatus === 'I' && !self._activeQuery && self._queryQueue.length === 0;
    return super.query({ name, text, values }).catch((err: unknown) => {
      if (resultChanged(err)) names.set(text, null);
      else if (statementLost(err)) delete self.connection.parsedStatements[name];
      else throw err;
      if (alone) return this.query(text, values);
      throw err;
    });
  }
}

/**
 * The row with id $1 in the scope ($2 business, $3 environment), for a statement marked by planOnce: the scope is a
 * filter (`IS TRUE` is never an index condition), so every plan finds the row by its primary key. Left as plain
 * conditions, a generic plan made without statistics walked the scope index (business, environment, created_at, id)
 * and filtered by id: as many rows as the business has.
 */
export function byIdInScope(alias?: string): string {
  const c = alias ? `${alias}.` : '';
  return `${c}id = $1 AND (${c}business_id = $2 AND ${c}environment = $3) IS TRUE`;
}
