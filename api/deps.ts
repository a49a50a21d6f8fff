import type { DataSource } from 'typeorm';
import { getConfig, type Config } from '../shared/config.js';
import { createDataSource } from '../shared/db/data-source.js';
import { poolSizeFor } from '../shared/db/pool-sizes.js';
import { logger } from '../shared/logger.js';
import { createApiRedis, createWorkerRedis, whenReady } from '../shared/queues/connections.js';
import { JobWaiters } from './job-waiters.js';
import { closeQueues, createQueues } from '../shared/queues/producer.js';
import { flushOutboxMarks } from '../shared/queues/outbox.js';
import type { AppDeps } from './context.js';
import { installScripts } from './middleware/redis-scripts.js';
import { UnsettledRecords } from './middleware/idempotency-store.js';

/** Connects what the web process needs. The DataSource may be shared (tests pass theirs). */
export async function createAppDeps(options: { config?: Config; ds?: DataSource } = {}): Promise<AppDeps> {
  const config = options.config ?? getConfig();
  // Through the connection pooler when one is configured (DATABASE_CONNECTION_POOL_URL).
  const ds = options.ds ?? createDataSource({ service: true, poolSize: poolSizeFor('web', config.databasePoolSize) });
  if (!ds.isInitialized) await ds.initialize();
  const redis = createApiRedis(config.redisUrl, config.redisCommandTimeoutMs);
  // Producer queues get their own fail-fast connection, so BullMQ's blocking needs never touch the request path.
  const queueRedis = createApiRedis(config.redisUrl, config.redisCommandTimeoutMs);
  // Give Redis a moment at boot; if it is down the process still starts and runs degraded.
  await Promise.all([whenReady(redis), whenReady(queueRedis)]);
  const scripts = installScripts(redis);
  return {
    config, ds, redis, scripts, producerRedis: queueRedis, queues: createQueues(queueRedis, config.redisPrefix), log: logger(),
    unsettled: new UnsettledRecords({ scripts, redis, config }),
    // QueueEvents blocks its connection reading the events stream: it gets its own, with the patient profile.
    pricingWaiters: new JobWaiters('pricing', createWorkerRedis(config.redisUrl), config.redisPrefix),
  };
}

export async function closeAppDeps(deps: AppDeps, options: { keepDataSource?: boolean } = {}): Promise<void> {
  await deps.unsettled.close();
  await deps.pricingWaiters.close();
  await closeQueues(deps.queues);
  deps.redis.disconnect();
  deps.producerRedis.disconnect();
  await flushOutboxMarks(deps.ds);
  if (!options.keepDataSource && deps.ds.isInitialized) await deps.ds.destroy();
}
