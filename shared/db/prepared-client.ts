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

/**
 * What a prepared statement's rows look like, as PostgreSQL described them the first time it ran on a connection: the
 * fields, their parsers, and the empty row pg copies for each row.
 */
interface Shape {
  fields: unknown[];
  parsers: unknown[];
  empty: Record<string, null>;
}

type ResultInternals = { fields: unknown[]; _parsers: unknown[]; _prebuiltEmptyResultObject: Record<string, null> };
type QueryInternals = { name?: string; callback?: unknown; _result: ResultInternals; _accumulateRows: boolean; _checkForMultirow(): void };
type ConnectionInternals = { parsedStatements: Record<string, string>; describe?: (msg: unknown) => void };

/**
 * A named statement's execution, without asking PostgreSQL to describe its rows again once it has on this connection
 * (pg asks on every execution: a RowDescription of every column sent, parsed, and turned into parsers and an empty row
 * each time, a quarter of the client's time for a wide row). The shape is kept per connection, beside the statement
 * it describes: a statement prepared again (a new connection, or one the connection lost) is described again, and one
 * whose result changed is refused by PostgreSQL before any row (the stale-plan path below, which forgets it). The
 * parsers are those in force when the statement was first described on the connection (readTimestampsFast and
 * row-shapes.ts install theirs before any connection is made).
 */
class ShapedQuery extends pg.Query {
  /** The shape this execution's rows take, until its first row takes it. */
  private pending: Shape | undefined;

  constructor(config: pg.QueryConfig, private readonly shapes: Map<string, Shape>) {
    super(config);
  }

  prepare(connection: ConnectionInternals): void {
    const name = (this as unknown as QueryInternals).name;
    const shape = name !== undefined && connection.parsedStatements[name] !== undefined ? this.shapes.get(name) : undefined;
    const base = pg.Query.prototype as unknown as { prepare(c: unknown): void };
    if (!shape) return base.prepare.call(this, connection);
    this.pending = shape;
    const own = Object.prototype.hasOwnProperty.call(connection, 'describe');
    const describe = connection.describe;
    connection.describe = () => undefined;
    try {
      base.prepare.call(this, connection);
    } finally {
      if (own) connection.describe = describe;
      else delete connection.describe;
    }
  }

  handleRowDescription(msg: { fields: unknown[] }): void {
    (pg.Query.prototype as unknown as { handleRowDescription(m: unknown): void }).handleRowDescription.call(this, msg);
    const self = this as unknown as QueryInternals;
    if (self.name !== undefined) this.shapes.set(self.name, { fields: self._result.fields, parsers: self._result._parsers, empty: self._result._prebuiltEmptyResultObject });
  }

  handleDataRow(msg: unknown): void {
    this.takeShape();
    (pg.Query.prototype as unknown as { handleDataRow(m: unknown): void }).handleDataRow.call(this, msg);
  }

  /**
   * What handleRowDescription does with a description, from the one kept, at this statement's first row: its own result
   * (after any statement sent before it in the same batch) gets the fields, parsers and empty row. A result with no row
   * keeps pg's empty field list: its end cannot be told from the end of a statement sent before it in the batch
   * (transaction-client.ts), and nothing here reads the fields of a result with no row.
   */
  private takeShape(): void {
    const shape = this.pending;
    if (!shape) return;
    this.pending = undefined;
    const self = this as unknown as QueryInternals;
    self._checkForMultirow();
    self._result.fields = shape.fields;
    self._result._parsers = shape.parsers;
    self._result._prebuiltEmptyResultObject = shape.empty;
    self._accumulateRows = Boolean(self.callback) || !this.listeners('row').length;
  }
}

export class PreparingClient extends pg.Client {
  private prepared = 0;
  /** The shapes of this connection's prepared statements, by name (ShapedQuery). */
  private readonly shapes = new Map<string, Shape>();

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
    const ran = new Promise<pg.QueryResult>((resolve, reject) => {
      const query = new ShapedQuery({ name, text, values, callback: (err: Error | undefined, result: pg.QueryResult) => (err ? reject(err) : resolve(result)) } as pg.QueryConfig, this.shapes);
      super.query(query);
    });
    return ran.catch((err: unknown) => {
      // As pg's own promise does: captured here, the stack leads back through the awaiting callers, not to the
      // socket's read.
      if (err instanceof Error) Error.captureStackTrace(err);
      this.shapes.delete(name);
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
