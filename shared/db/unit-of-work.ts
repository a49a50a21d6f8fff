import type { DataSource, EntityManager } from 'typeorm';
import type { Logger } from 'pino';
import type { Queues, JobRequest } from '../queues/producer.js';
import type { JobName } from '../queues/registry.js';
import { dispatchStaged, stageJob, type OutboxScope, type StagedJob } from '../queues/outbox.js';

/** What a unit of work runs on: the web process and the workers both have these. */
export interface UnitDeps {
  ds: DataSource;
  queues: Queues;
  log: Logger;
}

/**
 * One database transaction, handed to domain code: it writes through `em`, and stages jobs that are written to
 * the outbox in the same transaction and enqueued only after the commit (the outbox relay is the safety net).
 */
export interface Unit {
  em: EntityManager;
  stage<N extends JobName>(job: JobRequest<N>, scope?: OutboxScope): Promise<void>;
}

/** Runs `work` in one transaction, commits, then dispatches what it staged. Domain code never opens its own. */
export async function inUnit<T>(deps: UnitDeps, work: (unit: Unit) => Promise<T>): Promise<T> {
  const staged: StagedJob[] = [];
  const result = await deps.ds.transaction((em) =>
    work({
      em,
      stage: async (job, scope) => {
        staged.push(await stageJob(em, job, scope));
      },
    }),
  );
  if (staged.length) await dispatchStaged(deps.ds, deps.queues, staged, deps.log);
  return result;
}
