import 'reflect-metadata';
import { join } from 'node:path';
import pg from 'pg';
import { DataSource, MigrationExecutor } from 'typeorm';
import { getConfig } from '../config.js';
import { PreparingClient } from './prepared-client.js';
import { transactionClient } from './transaction-client.js';
import { shareRowShapes } from './row-shapes.js';
import { readTimestampsFast } from './timestamps.js';

const root = join(import.meta.dirname, '..', '..');
// Compiled (dist/, npm run build) the entities and migrations are .js beside this file; under tsx, .ts.
const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';

export interface DataSourceOptions {
  /**
   * A running process (web, worker pools): through the connection pooler when one is configured
   * (DATABASE_CONNECTION_POOL_URL), else direct. Unset: direct (DATABASE_URL), as migrations and admin commands need.
   */
  service?: boolean;
  /** An explicit URL (tests, benches); `throughPooler` says it is a transaction-mode pooler's. */
  url?: string;
  throughPooler?: boolean;
  poolSize?: number;
  /** Per transaction (SET LOCAL); DATABASE_STATEMENT_TIMEOUT_MS unless given; migrations pass 0 for none. */
  statementTimeoutMs?: number;
}

/**
 * The pool's client: each transaction TypeORM opens gets the statement timeout (`SET LOCAL statement_timeout = N`)
 * with its opening, sent in front of its first statement, and a unit of work's COMMIT goes with its last
 * (transaction-client.ts). Nothing is sent at connection start but what PgBouncer tracks (user, database,
 * application_name): a transaction-mode pooler refuses other startup parameters, and would lose a session SET the
 * moment the transaction ends.
 */
function clientClass(prepare: boolean, statementTimeoutMs: number): typeof pg.Client {
  // Every result with a column list seen before reuses its empty row (row-shapes.ts); timestamps are read by their
  // digits (timestamps.ts).
  shareRowShapes();
  readTimestampsFast();
  return transactionClient(prepare ? PreparingClient : pg.Client, statementTimeoutMs);
}

/** The URL, its SSL and whether prepared statements are used, for these options. */
function target(options: DataSourceOptions): { url: string; ssl: false | { rejectUnauthorized: boolean }; prepare: boolean } {
  const config = getConfig();
  if (options.url) return { url: options.url, ssl: config.databaseSsl, prepare: config.databasePrepare ?? !options.throughPooler };
  if (options.service && config.databasePoolUrl) return { url: config.databasePoolUrl, ssl: config.databasePoolSsl, prepare: config.databasePrepare ?? false };
  return { url: config.databaseUrl, ssl: config.databaseSsl, prepare: config.databasePrepare ?? true };
}

export function createDataSource(options: DataSourceOptions = {}): DataSource {
  const config = getConfig();
  const { url, ssl, prepare } = target(options);
  return new DataSource({
    type: 'postgres',
    url,
    ssl,
    entities: [join(root, 'shared', 'db', 'entities', `*.entity.${ext}`)],
    migrations: [join(root, 'migrations', `*.${ext}`)],
    migrationsTableName: 'schema_migrations',
    synchronize: false,
    logging: false,
    extra: {
      max: options.poolSize ?? 10,
      application_name: 'rampway',
      connectionTimeoutMillis: 5_000,
      Client: clientClass(prepare, options.statementTimeoutMs ?? config.databaseStatementTimeoutMs),
    },
  });
}

/** The advisory lock (transaction-scoped) that makes concurrent deploys or test runs apply migrations one at a time. */
const MIGRATION_LOCK = 727274;

/**
 * Applies pending migrations, all in one transaction that first takes a transaction-scoped advisory lock: a second
 * runner waits for the first to commit, then finds nothing pending. Transaction-scoped, so it holds through a
 * transaction-mode pooler too (a session lock and its unlock can land on different server connections there, and the
 * lock then stays held). All or nothing: a failing migration leaves none of the release's applied.
 *
 * It then makes `statementTimeoutMs` (DATABASE_STATEMENT_TIMEOUT_MS) the role's default in this database, so a
 * statement outside any transaction has the same limit as one inside (where SET LOCAL sets it), through a pooler and
 * directly alike. A role not allowed to (it may change its own defaults on PostgreSQL; a host may forbid it) keeps
 * its default: the answer says so.
 */
export async function runMigrations(ds: DataSource, options: { statementTimeoutMs?: number } = {}): Promise<string[]> {
  const runner = ds.createQueryRunner();
  await runner.connect();
  try {
    await runner.startTransaction();
    await runner.query(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
    const executor = new MigrationExecutor(ds, runner);
    executor.transaction = 'all';
    const applied = await executor.executePendingMigrations();
    await setRoleStatementTimeout(runner, options.statementTimeoutMs ?? getConfig().databaseStatementTimeoutMs);
    await runner.commitTransaction();
    return applied.map((m) => m.name);
  } catch (err) {
    if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
    throw err;
  } finally {
    await runner.release();
  }
}

/** `ALTER ROLE CURRENT_USER IN DATABASE <this one> SET statement_timeout`, skipped (with a notice) when not allowed. */
export async function setRoleStatementTimeout(runner: { query(sql: string): Promise<unknown> }, ms: number): Promise<void> {
  await runner.query(`DO $$ BEGIN
    EXECUTE format('ALTER ROLE CURRENT_USER IN DATABASE %I SET statement_timeout = %s', current_database(), ${Math.trunc(ms)});
  EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'statement_timeout left as it is for this role: %', SQLERRM;
  END $$`);
}
