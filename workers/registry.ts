import type { Job } from 'bullmq';
import type { DataSource } from 'typeorm';
import type { Logger } from 'pino';
import type { Config } from '../shared/config.js';
import type { Queues } from '../shared/queues/producer.js';
import type { JobName, JobPayloads, Pool } from '../shared/queues/registry.js';
import { cleanupOutbox } from './outbox/cleanup-outbox.job.js';

/** What every processor is handed besides its job. */
export interface WorkerDeps {
  config: Config;
  ds: DataSource;
  queues: Queues;
  log: Logger;
}

export type Processor<N extends JobName> = (job: Job<JobPayloads[N]>, deps: WorkerDeps & { log: Logger }) => Promise<unknown>;

export type ProcessorTable = { [N in JobName]?: Processor<N> };

export interface PoolSpec {
  concurrency: number;
  processors: ProcessorTable;
}

/** Pool -> its processors (one queue per pool, jobs told apart by name). A job without a processor fails loudly. */
export const REGISTRY: Record<Pool, PoolSpec> = {
  pricing: { concurrency: 20, processors: {} },
  settlement: { concurrency: 10, processors: {} },
  providers: { concurrency: 20, processors: {} },
  sandbox: { concurrency: 50, processors: {} },
  webhooks: { concurrency: 20, processors: { 'outbox.cleanup': cleanupOutbox } },
};
