import { Redis } from 'ioredis';
import type { DataSource } from 'typeorm';
import { getConfig, holdWalletSeeds, resetConfig } from '../../shared/config.js';
import { createDataSource, runMigrations } from '../../shared/db/data-source.js';

// Mocha loads the root hooks (test/setup.ts) and the test files through different module instances, so the
// shared handles live on globalThis: the after-all hook must close what the tests opened.
const shared = globalThis as unknown as { __rampwayTestDs?: DataSource | null; __rampwayTestRedis?: Redis | null; __rampwayConfigResets?: Set<() => void> };

// Each module instance of the configuration registers its reset, so the root hooks (another instance) can make every
// one of them read a test file's own Redis prefix.
(shared.__rampwayConfigResets ??= new Set()).add(resetConfig);
// One process plays every part here, the settlement pool's included: every instance's getConfig() reads the seeds, as
// that pool's does. A harness given its own env loads a web process's configuration, without them (harness.ts).
holdWalletSeeds();

/** Points every later getConfig() at `prefix`: each test file gets its own queues, rate limits and idempotency keys. */
export function useRedisPrefix(prefix: string): void {
  process.env.REDIS_PREFIX = prefix;
  for (const reset of shared.__rampwayConfigResets ?? []) reset();
}

/** The migrated test database, shared by every test file. */
export async function getDs(): Promise<DataSource> {
  if (!shared.__rampwayTestDs) {
    // TEST_DATABASE_POOL_URL (npm run test:pooler): the tests' service, and these migrations, through a pooler.
    const pooler = process.env.TEST_DATABASE_POOL_URL;
    const ds = createDataSource(pooler ? { url: pooler, throughPooler: true, poolSize: 20 } : { poolSize: 20 });
    shared.__rampwayTestDs = ds;
    await ds.initialize();
    await runMigrations(ds);
  }
  return shared.__rampwayTestDs;
}

/** A plain Redis client for assertions (and cleanup) under the run's prefix. */
export function testRedis(): Redis {
  shared.__rampwayTestRedis ??= new Redis(getConfig().redisUrl, { maxRetriesPerRequest: null });
  return shared.__rampwayTestRedis;
}

export async function deleteKeys(pattern: string): Promise<void> {
  const r = testRedis();
  let cursor = '0';
  do {
    const [next, keys] = await r.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await r.del(...keys);
  } while (cursor !== '0');
}

/** After the run: every key under the run's prefix (each file's prefix starts with it) is deleted, and the shared handles are closed. */
export async function closeShared(runPrefix: string): Promise<void> {
  await deleteKeys(`${runPrefix}*`);
  shared.__rampwayTestRedis?.disconnect();
  shared.__rampwayTestRedis = null;
  const ds = shared.__rampwayTestDs;
  shared.__rampwayTestDs = null;
  if (ds?.isInitialized) await ds.destroy();
}
