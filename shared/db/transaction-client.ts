import type { EntityManager } from 'typeorm';
import pg from 'pg';

// The pool's client, as every transaction sees it: its opening and, for a unit of work, its COMMIT travel with a
// statement instead of costing a round trip each.
//
// - Opening. TypeORM opens a transaction with `START TRANSACTION` and waits for it. Here it waits for nothing: the
//   opening (`START TRANSACTION`, then `SET LOCAL statement_timeout`) is sent in front of the transaction's first
//   statement, in the same write, as statements of the same extended-protocol batch (one Sync). A transaction that
//   ends before any statement (COMMIT or ROLLBACK straight away) sends nothing at all. A first statement sent as
//   plain text (no parameters: the simple protocol cannot share a batch) is sent after the opening, as before.
// - Closing. `commitWith` sends a unit's last statement with `COMMIT` behind it (again one batch): TypeORM's own
//   COMMIT that follows is then answered here. If the statement fails, PostgreSQL skips the COMMIT and the
//   transaction is rolled back by TypeORM as always; if the COMMIT fails (a deferred check), the statement's caller
//   gets that error and nothing was committed.
//
// PostgreSQL runs a batch's statements in order and stops at the first error, so this changes when bytes leave, never
// what runs or in which transaction. Through a transaction-mode pooler it holds as well: the pooler hands the
// connection back at the ReadyForQuery that closes the batch, where the transaction has ended or is still open.

/** TypeORM opens every transaction with this text (PostgresQueryRunner.startTransaction). */
export const BEGIN = 'START TRANSACTION';

type Connection = {
  parse(msg: { text: string; name?: string; types?: unknown[] }): void;
  bind(msg: { portal?: string; statement?: string; values?: unknown[] }): void;
  execute(msg: { portal?: string; rows?: number }): void;
  sync(): void;
  query(text: string): void;
};
type Internals = { connection: Connection; _txStatus: string | null; _activeQuery: unknown; _queryQueue: unknown[] };

/** Sends `texts` as parameterless statements of the batch being written (no Sync). */
function sendPlain(connection: Connection, texts: readonly string[]): void {
  for (const text of texts) {
    connection.parse({ text, name: '', types: [] });
    connection.bind({ portal: '', statement: '', values: [] });
    connection.execute({ portal: '', rows: 0 });
  }
}

/** What TypeORM is answered for a statement that was not sent (yet). */
const answered = (command: string) => ({ command, rowCount: null, oid: null, rows: [], fields: [] });

/** A pool client class whose transactions open and commit without round trips of their own (see above). */
export function transactionClient(Base: typeof pg.Client, statementTimeoutMs: number): typeof pg.Client {
  const opening = [BEGIN, `SET LOCAL statement_timeout = ${Math.trunc(statementTimeoutMs)}`];
  return class TransactionClient extends Base {
    /** The transaction opened by TypeORM but not sent yet. */
    private opened = false;
    /** The transaction's COMMIT went with its last statement: TypeORM's own is answered here. */
    private committed = false;

    // pg's query() has many overloads; only TypeORM's (text, values) and its transaction texts are looked at.
    override query(...args: any[]): any {
      const [text, values] = args;
      const plain = typeof text === 'string' && (args.length === 1 || args[1] === undefined);
      const self = this as unknown as Internals;
      if (plain && text === BEGIN) {
        if (self._txStatus === 'I' && !self._activeQuery && self._queryQueue.length === 0 && !this.opened) {
          this.opened = true;
          return Promise.resolve(answered('START'));
        }
        return super.query(opening.join('; '));
      }
      if (plain && text === 'COMMIT' && this.committed) {
        this.committed = false;
        return Promise.resolve(answered('COMMIT'));
      }
      if (plain && text === 'ROLLBACK' && this.committed) {
        // Something after the unit's last statement threw: what it wrote is committed (commitWith is a unit's last act).
        this.committed = false;
        return Promise.resolve(answered('ROLLBACK'));
      }
      if (!this.opened) return (super.query as (...a: any[]) => any)(...args);
      this.opened = false;
      if (plain && (text === 'COMMIT' || text === 'ROLLBACK')) return Promise.resolve(answered(text));
      if (typeof text === 'string' && Array.isArray(values) && values.length > 0 && args.length === 2 && this.idle()) return this.batched(text, values, opening, []);
      // Plain text cannot share a batch: the opening goes first, on its own.
      return (super.query(opening.join('; ')) as Promise<unknown>).then(() => (super.query as (...a: any[]) => any)(...args));
    }

    /** Nothing sent and nothing waiting: the next message written on the connection is the next query's. */
    private idle(): boolean {
      const self = this as unknown as Internals;
      return !self._activeQuery && self._queryQueue.length === 0;
    }

    /** The unit's last statement with COMMIT behind it; answers its result (null: sent as a plain statement, no COMMIT). */
    commitWith(text: string, values: unknown[]): Promise<pg.QueryResult> | null {
      if (values.length === 0 || !this.idle()) return null;
      const leading = this.opened ? opening : [];
      this.opened = false;
      return this.batched(text, values, leading, ['COMMIT']).then((rows) => {
        this.committed = true;
        return rows;
      });
    }

    /**
     * Sends `leading`, the statement and `trailing` as one batch: the first message the statement writes (its Parse,
     * or its Bind when prepared already) is preceded by the leading statements, and its Sync by the trailing ones.
     * Answers the statement's own result (pg answers every statement of the batch; the others are ours).
     */
    private batched(text: string, values: unknown[], leading: readonly string[], trailing: readonly string[]): Promise<any> {
      const self = this as unknown as Internals;
      const connection = self.connection;
      const own = { parse: connection.parse, bind: connection.bind, sync: connection.sync };
      let led = leading.length === 0;
      const lead = () => {
        if (led) return;
        led = true;
        connection.parse = own.parse;
        connection.bind = own.bind;
        sendPlain(connection, leading);
      };
      if (!led) {
        connection.parse = (msg) => (lead(), own.parse.call(connection, msg));
        connection.bind = (msg) => (lead(), own.bind.call(connection, msg));
      }
      if (trailing.length) {
        connection.sync = () => {
          connection.sync = own.sync;
          sendPlain(connection, trailing);
          own.sync.call(connection);
        };
      }
      // Inside the transaction from the server's view once the batch runs (a prepared-statement retry must not run
      // the statement on its own).
      if (leading.length) self._txStatus = 'T';
      const restore = () => {
        connection.parse = own.parse;
        connection.bind = own.bind;
        connection.sync = own.sync;
      };
      return (super.query(text, values) as Promise<pg.QueryResult | pg.QueryResult[]>).then(
        (result) => {
          restore();
          const results = Array.isArray(result) ? result : [result];
          return results[leading.length];
        },
        (err: unknown) => {
          restore();
          throw err;
        },
      );
    }
  };
}

/** The unit's last statement, sent with its COMMIT (see above); answers its rows as `em.query` would for a RETURNING. */
export async function commitWith(em: EntityManager, text: string, values: unknown[]): Promise<any[]> {
  const client = (em.queryRunner as unknown as { databaseConnection?: unknown } | undefined)?.databaseConnection as
    { commitWith?: (text: string, values: unknown[]) => Promise<pg.QueryResult> | null } | undefined;
  const sent = client?.commitWith?.(text, values);
  return sent ? (await sent).rows : em.query(text, values);
}
