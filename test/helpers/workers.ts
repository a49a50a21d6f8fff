import { logger } from '../../shared/logger.js';
import { getDs } from './shared.js';
import { getConfig, loadConfig, type Config } from '../../shared/config.js';
import { createWorkerRedis } from '../../shared/queues/connections.js';
import { closeQueues, createQueues } from '../../shared/queues/producer.js';
import type { Pool } from '../../shared/queues/registry.js';
import { startWorkers } from '../../workers/runtime.js';
import type { WorkerDeps } from '../../workers/registry.js';

export interface RunningPools {
  deps: WorkerDeps;
  close(): Promise<void>;
}

/** Real worker pools on the test database and Redis prefix, as `npm run worker -- <pools>` runs them. */
export async function startPools(pools: Pool[], options: { env?: Record<string, string> } = {}): Promise<RunningPools> {
  const config: Config = options.env ? loadConfig({ ...process.env, ...options.env }) : getConfig();
  const connection = createWorkerRedis(config.redisUrl);
  const queueConnection = createWorkerRedis(config.redisUrl);
  const deps: WorkerDeps = { config, ds: await getDs(), queues: createQueues(queueConnection, config.redisPrefix), log: logger() };
  const runtime = startWorkers({ pools, deps, connection });
  return {
    deps,
    async close() {
      await runtime.shutdown();
      await closeQueues(deps.queues);
      connection.disconnect();
      queueConnection.disconnect();
    },
  };
}
