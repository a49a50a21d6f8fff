import { getConfig } from '../shared/config.js';
import { createDataSource } from '../shared/db/data-source.js';
import { logger } from '../shared/logger.js';
import { createWorkerRedis, whenReady } from '../shared/queues/connections.js';
import { closeQueues, createQueues } from '../shared/queues/producer.js';
import { poolsFromArgs, startWorkers } from './runtime.js';

const config = getConfig();
const log = logger();
const pools = poolsFromArgs(process.argv.slice(2).flatMap((a) => a.split(',')).filter(Boolean));
const ds = createDataSource();
await ds.initialize();
const connection = createWorkerRedis(config.redisUrl);
const queues = createQueues(createWorkerRedis(config.redisUrl), config.redisPrefix);
// Re-declared every hour as well as now: Redis may lose its data, and an upsert is idempotent.
// Not awaited: with Redis down the workers still start (and say so) and wait for it.
const scheduleCleanup = () =>
  queues.webhooks
    .upsertJobScheduler('outbox-cleanup', { every: 3_600_000 }, { name: 'outbox.cleanup', data: { olderThanHours: 24 } })
    .catch((err: unknown) => log.warn({ err: (err as Error).message }, 'could not schedule the outbox cleanup; will retry'));
void scheduleCleanup();
const cleanupTimer = setInterval(scheduleCleanup, 3_600_000);
// Said only if Redis has not answered after a moment: right after creation every connection is still connecting.
void whenReady(connection).then((ready) => ready || log.warn('waiting for Redis; jobs start once it answers'));
const runtime = startWorkers({ pools, deps: { config, ds, queues, log }, connection });

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'workers finishing in-flight jobs');
  const timer = setTimeout(() => {
    log.error('shutdown timed out; unfinished jobs will be picked up again as stalled');
    process.exit(1);
  }, config.shutdownTimeoutMs).unref();
  clearInterval(cleanupTimer);
  await runtime.shutdown();
  await closeQueues(queues);
  connection.disconnect();
  await ds.destroy();
  clearTimeout(timer);
  log.info('workers stopped');
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
