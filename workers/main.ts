import { configureFor, getConfig, holdWalletSeeds } from '../shared/config.js';
import { needsOf } from '../shared/config-processes.js';
import { createDataSource } from '../shared/db/data-source.js';
import { poolSizeFor } from '../shared/db/pool-sizes.js';
import { logger } from '../shared/logger.js';
import { createApiRedis, createWorkerRedis, whenReady } from '../shared/queues/connections.js';
import { closeQueues, createQueues } from '../shared/queues/producer.js';
import { flushOutboxMarks } from '../shared/queues/outbox.js';
import { poolsFromArgs, startWorkers } from './runtime.js';
import { serveWorkerMetrics } from './metrics-server.js';
import { operatorFailures } from '../api/middleware/basic-auth.js';
import { installScripts } from '../api/middleware/redis-scripts.js';
import { catchStopSignals } from '../shared/stop-signals.js';

const signals = catchStopSignals();

const pools = poolsFromArgs(process.argv.slice(2).flatMap((a) => a.split(',')).filter(Boolean));
// Only the settlement pool signs: a worker process without it never reads WALLET_SEED / WALLET_SEED_LIVE.
if (pools.includes('settlement')) holdWalletSeeds();
configureFor(needsOf(pools), `the worker process (${pools.join(', ')})`);
const config = getConfig();
const log = logger();
// Through the connection pooler when one is configured (DATABASE_CONNECTION_POOL_URL).
const ds = createDataSource({ service: true, poolSize: poolSizeFor(pools, config.databasePoolSize) });
await ds.initialize();
const connection = createWorkerRedis(config.redisUrl);
const queues = createQueues(createWorkerRedis(config.redisUrl), config.redisPrefix);
// Said only if Redis has not answered after a moment: right after creation every connection is still connecting.
void whenReady(connection).then((ready) => ready || log.warn('waiting for Redis; jobs start once it answers'));
let metricsRedis: ReturnType<typeof createApiRedis> | undefined;
const runtime = startWorkers({ pools, deps: { config, ds, queues, log }, connection });
let stopping = false;
signals.drainWith((signal) => void shutdown(signal));
if (config.workerMetricsPort) {
  // Metrics are for operators only: without their credentials the port answers /health alone.
  if (!config.adminUser || !config.adminPassword) log.warn('ADMIN_USER / ADMIN_PASSWORD are unset: the worker port serves /health only, no metrics');
  // The failure count is a request's: fail fast (a scrape is never held waiting for Redis), as in the web process.
  metricsRedis = createApiRedis(config.redisUrl);
  const failures = operatorFailures(installScripts(metricsRedis), config.redisPrefix);
  await serveWorkerMetrics({ port: config.workerMetricsPort, user: config.adminUser, password: config.adminPassword, queues, log, failures });
}

async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'workers finishing in-flight jobs');
  const timer = setTimeout(() => {
    log.error('shutdown timed out; unfinished jobs will be picked up again as stalled');
    process.exit(1);
  }, config.shutdownTimeoutMs).unref();
  await runtime.shutdown();
  await closeQueues(queues);
  await flushOutboxMarks(ds);
  connection.disconnect();
  metricsRedis?.disconnect();
  await ds.destroy();
  clearTimeout(timer);
  log.info('workers stopped');
  process.exit(0);
}
