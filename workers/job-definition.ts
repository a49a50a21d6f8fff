import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { DataSource } from 'typeorm';
import type { Logger } from 'pino';
import type { Config } from '../shared/config.js';
import type { Queues } from '../shared/queues/producer.js';
import type { JobName, JobPayloads } from '../shared/queues/registry.js';

/** What every processor is handed besides its job. */
export interface WorkerDeps {
  config: Config;
  ds: DataSource;
  queues: Queues;
  log: Logger;
}

/**
 * `token` is the worker's lock on the job, for a processor that puts its job back to wait (moveToDelayed); `redis` the
 * pool's own connection, for processors that coordinate through Redis.
 */
export type Processor<N extends JobName> = (job: Job<JobPayloads[N]>, deps: WorkerDeps & { log: Logger; token?: string; redis?: Redis }) => Promise<unknown>;

export type ProcessorTable = { [N in JobName]?: Processor<N> };

/**
 * A job's worker half (its queue, attempts and backoff are in shared/queues/registry.ts, where producers read them):
 * the processor, and what happens when it fails for good, so no row is left silently stuck.
 */
export interface JobDefinition<N extends JobName> {
  name: N;
  process: Processor<N>;
  onFinalFailure?: (job: Job<JobPayloads[N]>, err: unknown, deps: WorkerDeps & { log: Logger }) => Promise<void>;
}

export function defineJob<N extends JobName>(definition: JobDefinition<N>): JobDefinition<N> {
  return definition;
}

/** A repeatable job, declared like the others: one scheduler id, so extra dynos never double it. */
export interface ScheduleDefinition<N extends JobName = JobName> {
  id: string;
  everyMs: number;
  name: N;
  data: JobPayloads[N];
}
