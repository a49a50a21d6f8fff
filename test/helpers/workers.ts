import type { Logger } from 'pino';
import { logger } from '../../shared/logger.js';
import { getDs } from './shared.js';
import { getConfig, loadConfig, type Config } from '../../shared/config.js';
import { createWorkerRedis } from '../../shared/queues/connections.js';
import { closeQueues, createQueues } from '../../shared/queues/producer.js';
import type { Pool } from '../../shared/queues/registry.js';
import { startWorkers } from '../../workers/runtime.js';
import type { WorkerDeps } from '../../workers/registry.js';
import { until } from './until.js';

export interface RunningPools {
  pools: Pool[];
  deps: WorkerDeps;
  close(): Promise<void>;
}

/** Real worker pools on the test database and Redis prefix, as `npm run worker -- <pools>` runs them. */
export async function startPools(pools: Pool[], options: { env?: Record<string, string>; log?: Logger } = {}): Promise<RunningPools> {
  // This process also runs settlement jobs by hand (the pool "down, its jobs run here"): it reads the seeds, as getConfig() does in the tests.
  const config: Config = options.env ? loadConfig({ ...process.env, ...options.env }, { walletSeeds: true }) : getConfig();
  const connection = createWorkerRedis(config.redisUrl);
  const queueConnection = createWorkerRedis(config.redisUrl);
  const deps: WorkerDeps = { config, ds: await getDs(), queues: createQueues(queueConnection, config.redisPrefix), log: options.log ?? logger() };
  const runtime = startWorkers({ pools, deps, connection });
  return {
    pools,
    deps,
    async close() {
      await runtime.shutdown();
      await closeQueues(deps.queues);
      connection.disconnect();
      queueConnection.disconnect();
    },
  };
}

/** Waits until the pools' queues have no job waiting or running (delayed jobs, such as expiries far ahead, do not count). */
export async function drainQueues(running: RunningPools, timeoutMs = 10_000): Promise<void> {
  let quietTwice = 0;
  let counts: Record<string, number>[] = [];
  await until(async () => {
    counts = await Promise.all(running.pools.map((pool) => running.deps.queues[pool].getJobCounts('waiting', 'active', 'prioritized')));
    quietTwice = counts.every((c) => c.waiting + c.active + c.prioritized === 0) ? quietTwice + 1 : 0;
    return quietTwice >= 2;
  }, { timeoutMs, what: 'the queues draining', describe: () => counts });
}
