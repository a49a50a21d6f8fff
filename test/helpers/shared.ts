import { Redis } from 'ioredis';
import type { DataSource } from 'typeorm';
import { getConfig } from '../../shared/config.js';
import { createDataSource, runMigrations } from '../../shared/db/data-source.js';

let ds: DataSource | null = null;
let redis: Redis | null = null;

/** The migrated test database, shared by every test file. */
export async function getDs(): Promise<DataSource> {
  if (!ds) {
    ds = createDataSource({ poolSize: 20 });
    await ds.initialize();
    await runMigrations(ds);
  }
  return ds;
}

/** A plain Redis client for assertions (and cleanup) under the run's prefix. */
export function testRedis(): Redis {
  redis ??= new Redis(getConfig().redisUrl, { maxRetriesPerRequest: null });
  return redis;
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

export async function closeShared(): Promise<void> {
  if (redis) {
    await deleteKeys(`${getConfig().redisPrefix}*`);
    redis.disconnect();
    redis = null;
  }
  if (ds?.isInitialized) await ds.destroy();
  ds = null;
}
