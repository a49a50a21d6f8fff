import 'reflect-metadata';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { getConfig } from '../config.js';
import { PreparingClient } from './prepared-client.js';

const root = join(import.meta.dirname, '..', '..');
// Compiled (dist/, npm run build) the entities and migrations are .js beside this file; under tsx, .ts.
const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';

/**
 * statementTimeoutMs bounds every query of the service (a stuck request must end well before its idempotency
 * lock would matter); migrations pass 0 for none.
 */
export function createDataSource(overrides: { url?: string; poolSize?: number; statementTimeoutMs?: number } = {}): DataSource {
  const config = getConfig();
  return new DataSource({
    type: 'postgres',
    url: overrides.url ?? config.databaseUrl,
    ssl: config.databaseSsl,
    entities: [join(root, 'shared', 'db', 'entities', `*.entity.${ext}`)],
    migrations: [join(root, 'migrations', `*.${ext}`)],
    migrationsTableName: 'schema_migrations',
    synchronize: false,
    logging: false,
    extra: {
      max: overrides.poolSize ?? 10,
      application_name: 'rampway',
      statement_timeout: overrides.statementTimeoutMs ?? 30_000,
      connectionTimeoutMillis: 5_000,
      ...(config.databasePrepare ? { Client: PreparingClient } : {}),
    },
  });
}

/**
 * Applies pending migrations under an advisory lock, so concurrent deploys or test runs do not race.
 * The lock holds one pooled connection while the migrations use another: the pool needs at least two.
 */
export async function runMigrations(ds: DataSource): Promise<string[]> {
  const poolMax = (ds.options as { extra?: { max?: number } }).extra?.max ?? 10;
  if (poolMax < 2) throw new Error('runMigrations needs a DataSource pool of at least 2 connections');
  const runner = ds.createQueryRunner();
  await runner.connect();
  try {
    await runner.query('SELECT pg_advisory_lock(727274)');
    const applied = await ds.runMigrations({ transaction: 'each' });
    return applied.map((m) => m.name);
  } finally {
    await runner.query('SELECT pg_advisory_unlock(727274)').catch(() => undefined);
    await runner.release();
  }
}
