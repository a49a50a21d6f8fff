import type { DataSource, EntityManager } from 'typeorm';
import type { Logger } from 'pino';
import type { Queues, JobRequest } from '../queues/producer.js';
import type { JobName } from '../queues/registry.js';
import { dispatchStaged, stageJobs, type OutboxScope } from '../queues/outbox.js';
import type { EventScope } from '../domain/events.js';
import type { EventType } from '../domain/machines.js';

/** What a unit of work runs on: the web process and the workers both have these. */
export interface UnitDeps {
  ds: DataSource;
  queues: Queues;
  log: Logger;
}

/**
 * One database transaction, handed to domain code: it writes through `em`. Events and staged jobs are collected and
 * written just before the commit, each kind in one statement (the jobs into the outbox, enqueued only after the
 * commit; the outbox relay is the safety net).
 */
export interface Unit {
  em: EntityManager;
  stage<N extends JobName>(job: JobRequest<N>, scope?: OutboxScope): Promise<void>;
  event(scope: EventScope, type: EventType, data: Record<string, unknown>): void;
}

interface PendingEvent {
  scope: EventScope;
  type: EventType;
  data: Record<string, unknown>;
}

async function writeEvents(em: EntityManager, events: PendingEvent[]): Promise<void> {
  if (!events.length) return;
  // In the order they happened: the identity `seq` follows the insertion order.
  await em.query(
    `INSERT INTO events (business_id, environment, type, data)
     SELECT b, e, t, d FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[]) WITH ORDINALITY AS x(b, e, t, d, o) ORDER BY o`,
    [events.map((e) => e.scope.businessId), events.map((e) => e.scope.environment), events.map((e) => e.type), events.map((e) => JSON.stringify(e.data))],
  );
}

/** Runs `work` in one transaction, writes its events and jobs, commits, then dispatches the jobs. Domain code never opens its own. */
export async function inUnit<T>(deps: UnitDeps, work: (unit: Unit) => Promise<T>): Promise<T> {
  const jobs: { job: JobRequest; scope: OutboxScope }[] = [];
  const events: PendingEvent[] = [];
  const { result, staged } = await deps.ds.transaction(async (em) => {
    const result = await work({
      em,
      stage: async (job, scope = {}) => {
        jobs.push({ job, scope });
      },
      event: (scope, type, data) => {
        events.push({ scope, type, data });
      },
    });
    await writeEvents(em, events);
    return { result, staged: await stageJobs(em, jobs) };
  });
  if (staged.length) await dispatchStaged(deps.ds, deps.queues, staged, deps.log);
  return result;
}
