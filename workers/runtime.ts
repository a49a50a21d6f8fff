import { DelayedError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { AppError, PermanentJobError } from '../shared/errors.js';
import { AmountError } from '../shared/domain/money.js';
import { InsufficientFundsError } from '../shared/domain/ledger.js';
import { POOLS, isPool, type JobName, type Pool } from '../shared/queues/registry.js';
import { FINAL_FAILURES, REGISTRY, schedules, type PoolSpec, type ScheduleDefinition, type WorkerDeps } from './registry.js';
import { JOBS } from '../shared/queues/registry.js';
import { startOutboxRelay } from './outbox/relay.js';
import { jobDuration, jobFailures } from '../shared/metrics.js';

/** The ids a job's data names (`transactionId`, `paymentIntentId`, ...): bound to every log line the job writes. */
export function idsOf(data: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (data && typeof data === 'object') for (const [k, v] of Object.entries(data)) if (/Id$/.test(k) && typeof v === 'string') out[k] = v;
  return out;
}

export interface WorkerRuntime {
  workers: Worker[];
  /** SIGTERM's path: stop taking jobs, let in-flight ones finish, stop the relay. Queues and DB are the caller's. */
  shutdown(): Promise<void>;
}

export interface StartOptions {
  pools: Pool[];
  deps: WorkerDeps;
  connection: Redis;
  registry?: Record<Pool, PoolSpec>;
  relay?: boolean;
  /** Declare the started pools' repeatable jobs (default true). */
  schedules?: boolean;
}

const SCHEDULE_CHECK_MS = 5_000;

/**
 * Declares the repeatable jobs of the started pools now, and again whenever Redis has lost any of them: every
 * SCHEDULE_CHECK_MS each scheduler is looked up where BullMQ keeps it, so a flushed or replaced Redis gets the chain
 * scans and the sweeper back within seconds, not at the next deploy. The schedulers themselves are looked at, not a
 * mark set after declaring: a flush landing between a declaration and its mark would leave the mark and no
 * scheduler. An upsert is idempotent, so several workers declaring at once is harmless. Not awaited: with Redis down
 * the workers still start and this waits for it.
 */
function keepScheduled(deps: WorkerDeps, schedules: ScheduleDefinition[]): () => void {
  if (!schedules.length) return () => undefined;
  const queueOf = (s: ScheduleDefinition) => deps.queues[JOBS[s.name].queue];
  const declare = () => Promise.all(schedules.map((s) => queueOf(s).upsertJobScheduler(s.id, { every: s.everyMs }, { name: s.name, data: s.data, opts: { attempts: 1 } })));
  const lost = async () => (await Promise.all(schedules.map((s) => queueOf(s).getJobScheduler(s.id)))).some((found) => !found);
  let declaring = false;
  const check = async () => {
    if (declaring) return;
    declaring = true;
    try {
      if (await lost()) {
        await declare();
        deps.log.info({ schedules: schedules.map((s) => s.id) }, 'repeatable jobs declared');
      }
    } catch (err) {
      deps.log.warn({ err: (err as Error).message }, 'could not declare the repeatable jobs; will retry');
    } finally {
      declaring = false;
    }
  };
  // At boot always (a deploy may change a schedule); a failure is logged, and the next check declares again.
  void declare().catch((err: unknown) => deps.log.warn({ err: (err as Error).message }, 'could not declare the repeatable jobs at boot; will retry')).then(check);
  const timer = setInterval(() => void check(), SCHEDULE_CHECK_MS);
  return () => clearInterval(timer);
}

export function startWorkers(options: StartOptions): WorkerRuntime {
  const registry = options.registry ?? REGISTRY;
  const { deps } = options;
  const workers = options.pools.map((pool) => {
    const spec = registry[pool];
    const worker = new Worker(
      pool,
      async (job: Job, token?: string) => {
        const processor = spec.processors[job.name as JobName] as ((j: Job, d: WorkerDeps & { token?: string; redis: Redis }) => Promise<unknown>) | undefined;
        if (!processor) throw new PermanentJobError(`no processor for job ${job.name} on pool ${pool}`);
        const log = deps.log.child({ pool, jobName: job.name, jobId: job.id, attempt: job.attemptsMade + 1, ...idsOf(job.data) });
        const started = performance.now();
        const took = () => (performance.now() - started) / 1000;
        try {
          const result = await processor(job, { ...deps, log, token, redis: options.connection });
          const seconds = took();
          jobDuration.observe({ queue: pool, job: job.name, outcome: 'completed' }, seconds);
          log.debug({ ms: Math.round(seconds * 1000) }, 'job completed');
          return result;
        } catch (err) {
          // The job put itself back to wait (moveToDelayed): not a failure, and not an attempt.
          if (err instanceof DelayedError) {
            jobDuration.observe({ queue: pool, job: job.name, outcome: 'delayed' }, took());
            throw err;
          }
          const failure = asJobFailure(err);
          const final = failure instanceof PermanentJobError || job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
          jobDuration.observe({ queue: pool, job: job.name, outcome: 'failed' }, took());
          jobFailures.inc({ queue: pool, job: job.name, final: String(final) });
          const onFinal = FINAL_FAILURES.get(job.name as JobName);
          // The last word on a job that will not run again: record the outcome, so nothing waits silently for ever.
          if (final && onFinal) await onFinal(job, err, { ...deps, log }).catch((e: unknown) => log.error({ err: (e as Error).message }, 'final-failure handler failed'));
          throw failure;
        }
      },
      {
        connection: options.connection,
        prefix: deps.config.redisPrefix,
        concurrency: spec.concurrency,
        // A killed worker's jobs go back to the queue once their lock lapses (checked as often).
        lockDuration: deps.config.workerLockMs,
        stalledInterval: deps.config.workerLockMs,
        // A job cut off by its worker dying runs again (every job is idempotent); only one that keeps killing it stops.
        maxStalledCount: deps.config.workerMaxStalls,
      },
    );
    worker.on('failed', (job, err) => {
      deps.log.warn({ pool, jobName: job?.name, jobId: job?.id, ...idsOf(job?.data), err: err.message }, 'job failed');
      // A job BullMQ's stall check marked as stalled too often is failed when next taken, without the processor (so
      // without its catch above): its final-failure handler runs here, so its row is not left waiting on a job that is over.
      if (!job?.deferredFailure) return;
      jobFailures.inc({ queue: pool, job: job.name, final: 'true' });
      // Not awaited by shutdown: a process stopped before it ends leaves the row to the sweeper, which retries the job.
      void finalizeStalled(deps, pool, job).catch((e: unknown) => deps.log.error({ pool, jobId: job.id, err: (e as Error).message }, 'final-failure handler failed'));
    });
    worker.on('error', (err) => deps.log.error({ pool, err: err.message }, 'worker error'));
    return worker;
  });
  const stopSchedules = options.schedules === false ? () => undefined : keepScheduled(deps, schedules(deps.config).filter((s) => options.pools.includes(JOBS[s.name].queue)));
  const stopRelay = options.relay === false
    ? async () => undefined
    : startOutboxRelay(deps.ds, deps.queues, deps.log, { pollMs: deps.config.outboxPollMs, graceMs: deps.config.outboxGraceMs });
  deps.log.info({ pools: options.pools }, 'workers started');

  return {
    workers,
    async shutdown() {
      // Worker.close() waits for the jobs in progress to finish.
      stopSchedules();
      await Promise.all([stopRelay(), ...workers.map((w) => w.close())]);
    },
  };
}

/**
 * A job BullMQ failed for stalling too often (its `deferredFailure`, set by the stall check and carried out by the next
 * worker to take it, which does not call the processor): its final-failure handler runs, as for any job that will not
 * run again.
 */
async function finalizeStalled(deps: WorkerDeps, pool: Pool, job: Job): Promise<void> {
  const onFinal = FINAL_FAILURES.get(job.name as JobName);
  if (!onFinal) return;
  const log = deps.log.child({ pool, jobName: job.name, jobId: job.id, ...idsOf(job.data) });
  log.warn({ err: job.deferredFailure }, 'job failed for good by stalling; its final-failure handler runs');
  await onFinal(job, new Error(job.deferredFailure), { ...deps, log });
}

/**
 * How the worker runtime reads an error: a coded business refusal, bad money or missing funds will not change by
 * retrying (give up: the processor has recorded what it could); an outage or anything unknown is retried with backoff.
 */
export function asJobFailure(err: unknown): unknown {
  if (err instanceof PermanentJobError) return err;
  const permanent =
    (err instanceof AppError && err.code !== 'service_unavailable' && err.code !== 'internal_error') || err instanceof AmountError || err instanceof InsufficientFundsError;
  return permanent ? new PermanentJobError(`${(err as Error).name}: ${(err as Error).message}`) : err;
}

/** `tsx workers/main.ts pricing settlement` starts those pools; `all` (or nothing) starts every pool. */
export function poolsFromArgs(args: string[]): Pool[] {
  const names = args.length === 0 || args.includes('all') ? [...POOLS] : args;
  const unknown = names.filter((n) => !isPool(n));
  if (unknown.length) throw new Error(`unknown worker pool(s): ${unknown.join(', ')}; known: ${POOLS.join(', ')}, all`);
  return [...new Set(names)] as Pool[];
}

