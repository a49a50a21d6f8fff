import type { DataSource, EntityManager } from 'typeorm';
import type { Logger } from 'pino';
import type { Queues, JobRequest } from '../queues/producer.js';
import type { JobName } from '../queues/registry.js';
import { dispatchStaged, OUTBOX_COLUMNS, outboxParams, outboxRowsFrom, type OutboxScope, type StagedJob } from '../queues/outbox.js';
import { JOB_QUEUES } from '../queues/registry.js';
import type { EventScope } from '../domain/events.js';
import type { EventType } from '../domain/machines.js';
import { postAtCommit, type EntryInput } from '../domain/ledger.js';
import { isStalePlan, planOnce } from './prepared-client.js';
import { endpointTakes, webhookJobs } from '../webhooks/fan-out.js';
import { recordInsert, recordParams, recordReplace, replacementParams, type DurableAnswer, type Replacement } from './idempotency-records.js';
import { commitWith } from './transaction-client.js';

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
  /**
   * A ledger entry posted last, after the events and jobs are written, just before the commit: a hot account's row
   * (a business's treasury) is then locked only for the commit. An entry that cannot post (overdraft) still fails
   * the whole unit. A unit that posts to a guarded account posts every entry this way (see the ordering in inUnit).
   * This is how domain code books: the one exception is an entry the caller must see refused at the point it decides
   * (a `noOverdraft` debit answered as 409 or action_required: a withdrawal, a treasury payout, sandbox funding and
   * transfers, and the sandbox chain's managed-wallet send, which is that wallet's simulated balance), a `guarded`
   * entry of a plan that apply() posts there. Otherwise adapters book nothing: they answer facts (a hash) for the
   * domain to book.
   */
  post(scope: EventScope, entry: EntryInput): void;
}

interface PendingEvent {
  scope: EventScope;
  type: EventType;
  data: Record<string, unknown>;
}

/** A webhook message's first delivery job, with MESSAGE where its id goes (its outbox row is written in SQL). */
const DELIVERY = webhookJobs.deliver('MESSAGE', 'ENDPOINT', 0, 1);
const [DELIVERY_ID_HEAD, DELIVERY_ID_TAIL] = DELIVERY.id.split('MESSAGE');

/** The unit's last statement, with (`replacing`) or without the CTE that replaces a waiting request's answer. */
const lastStatements = [false, true].map((replacing) => planOnce(`WITH ev AS (
       INSERT INTO events (business_id, environment, type, data, created_at)
       -- When they were written (clock_timestamp, not the transaction's start: a unit that waited for another's lock on
       -- the same resource writes later), a microsecond apart, so a unit's events keep the order they happened in.
       SELECT b, e, t, d, clock_timestamp() + (o - 1) * interval '1 microsecond'
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[]) WITH ORDINALITY AS x(b, e, t, d, o) ORDER BY o
       RETURNING id, business_id, environment, type),
     msg AS (
       INSERT INTO webhook_messages (event_id, endpoint_id, business_id, environment)
       SELECT ev.id, w.id, ev.business_id, ev.environment FROM ev
         JOIN webhook_endpoints w ON w.business_id = ev.business_id AND w.environment = ev.environment AND w.status IN ('enabled', 'failing')
        WHERE ${endpointTakes('ev.type')}
       RETURNING id, endpoint_id, business_id, environment),
     idem AS (${recordInsert(19)}),${replacing ? `
     replaced AS (${recordReplace(25)}),` : ''}
     staged AS (
       SELECT b, e, q, n, i, p, d, o FROM ${outboxRowsFrom(5)}
       UNION ALL
       SELECT msg.business_id, msg.environment, $12::text, $13::text, $14::text || msg.id::text || $15::text, $16::jsonb || jsonb_build_object('messageId', msg.id, 'endpointId', msg.endpoint_id),
              $17::integer, $18::bigint + row_number() OVER ()
         FROM msg)${replacing ? `,
     outboxed AS (` : ''}
     INSERT INTO outbox_jobs (${OUTBOX_COLUMNS})
     SELECT b, e, q, n, i, p, d FROM staged ORDER BY o RETURNING id, job_id, payload->>'messageId' AS message_id, payload->>'endpointId' AS endpoint_id${replacing ? `)
     -- Whether the waiting request's answer was replaced, as a last row of its own (the unit may stage no job at all).
     SELECT id, job_id, message_id, endpoint_id, NULL::bigint AS replaced FROM outboxed
     UNION ALL SELECT NULL, NULL, NULL, NULL, count(*) FROM replaced` : ''}`));

/** A unit with no events and no jobs: its record, and the answer it replaces, in one statement. */
const RECORDS_ONLY = planOnce(`WITH idem AS (${recordInsert(1)}), replaced AS (${recordReplace(7)}) SELECT count(*) AS replaced FROM replaced`);

/**
 * Writes the unit's events, one webhook message per event and endpoint that takes it, the outbox rows of the unit's
 * jobs and of each message's first delivery, the request's idempotency record, and the answer of a request that
 * waits for this unit (`replacement`, recordReplace), all in one statement (one round trip per unit, not two).
 * Answers the staged jobs, to be dispatched after the commit. A record whose key an earlier request holds fails the
 * statement, and the unit with it (idempotency-records.ts, isRecordConflict).
 */
async function writeEventsAndJobs(
  em: EntityManager, events: PendingEvent[], jobs: { job: JobRequest; scope: OutboxScope }[], answer: DurableAnswer | null,
  replacement: Replacement | null, last: boolean,
): Promise<StagedJob[]> {
  // The unit's last statement carries its COMMIT (transaction-client.ts): one round trip for both.
  const run = (text: string, params: unknown[]) => (last ? commitWith(em, text, params) : em.query(text, params));
  if (!events.length && !jobs.length) {
    if (replacement) {
      const [{ replaced }]: { replaced: string }[] = await run(RECORDS_ONLY, [...recordParams(answer), ...replacementParams(replacement)]);
      replacement.replaced = Number(replaced) > 0;
    } else if (answer) await run(planOnce(recordInsert(1)), recordParams(answer));
    return [];
  }
  const rows: { id: string; job_id: string; message_id: string | null; endpoint_id: string | null; replaced?: string | null }[] = await run(
    lastStatements[replacement ? 1 : 0],
    [
      events.map((e) => e.scope.businessId), events.map((e) => e.scope.environment), events.map((e) => e.type), events.map((e) => JSON.stringify(e.data)),
      ...outboxParams(jobs),
      JOB_QUEUES[DELIVERY.name], DELIVERY.name, DELIVERY_ID_HEAD, DELIVERY_ID_TAIL, JSON.stringify(DELIVERY.data), DELIVERY.delayMs ?? 0, jobs.length,
      ...recordParams(answer),
      ...(replacement ? replacementParams(replacement) : []),
    ],
  );
  if (replacement) {
    const last = rows.findIndex((r) => r.replaced !== null && r.replaced !== undefined);
    replacement.replaced = Number(rows.splice(last, 1)[0].replaced) > 0;
  }
  // The unit's own jobs first, in the order staged (the insert's order), then each message's delivery.
  return rows.map((r, i) => {
    if (i < jobs.length && r.job_id === jobs[i].job.id) return { outboxId: String(r.id), job: jobs[i].job };
    if (i >= jobs.length && r.message_id) return { outboxId: String(r.id), job: webhookJobs.deliver(r.message_id, r.endpoint_id!, 0, 1) };
    throw new Error(`outbox rows came back out of order (${r.job_id})`);
  });
}

/** PostgreSQL gave up on the transaction so that another could go on; running it again is the documented remedy. */
const RETRYABLE = new Set(['40P01', '40001']); // deadlock_detected, serialization_failure
const ATTEMPTS = 3;

/**
 * Runs `work` in one transaction, writes its events and jobs, commits, then dispatches the jobs. Domain code never
 * opens its own. A transaction PostgreSQL chose as a deadlock's victim is run again from the start (`work` only
 * writes through the unit, so nothing of the failed attempt remains); so is one that met a prepared statement a
 * migration made stale (prepared-client.ts: the retry runs that statement unnamed).
 */
export async function inUnit<T>(deps: UnitDeps, work: (unit: Unit) => Promise<T>, options: UnitOptions<T> = {}): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await runUnit(deps, work, options);
    } catch (err) {
      const stale = isStalePlan(err);
      if (attempt >= ATTEMPTS || !(stale || RETRYABLE.has((err as { code?: string }).code ?? ''))) throw err;
      deps.log.warn({ code: (err as { code?: string }).code, attempt }, stale ? 'unit of work retried after a migration changed a prepared statement\'s result' : 'unit of work retried after a deadlock');
    }
  }
}

export interface UnitOptions<T> {
  /**
   * The request's idempotency record, from the unit's result: written with the events and jobs, in the same statement,
   * so the resource never exists without it nor it without the resource.
   */
  answer?: (result: T) => DurableAnswer | null;
  /**
   * The answer of a request that waits for this unit (a quote's pricing: recordReplace), from the unit's result:
   * written in the same statement, so the request sends it without a statement of its own. The unit sets its
   * `replaced`: false when the request had already closed its record (its wait ran out) or the record is gone.
   */
  replace?: (result: T) => Replacement | null;
}

async function runUnit<T>(deps: UnitDeps, work: (unit: Unit) => Promise<T>, options: UnitOptions<T>): Promise<T> {
  const jobs: { job: JobRequest; scope: OutboxScope }[] = [];
  const events: PendingEvent[] = [];
  const postings: { scope: EventScope; entry: EntryInput }[] = [];
  const { result, staged } = await deps.ds.transaction(async (em) => {
    const result = await work({
      em,
      stage: async (job, scope = {}) => {
        jobs.push({ job, scope });
      },
      event: (scope, type, data) => {
        events.push({ scope, type, data });
      },
      post: (scope, entry) => {
        postings.push({ scope, entry });
      },
    });
    const staged = await writeEventsAndJobs(em, events, jobs, options.answer?.(result) ?? null, options.replace?.(result) ?? null, postings.length === 0);
    await postAtCommit(em, postings);
    return { result, staged };
  });
  if (staged.length) await dispatchStaged(deps.ds, deps.queues, staged, deps.log);
  return result;
}

/** The rows an UPDATE ... RETURNING wrote (TypeORM answers an UPDATE with [rows, count], a SELECT with rows). */
export async function updateReturning<R>(em: Pick<EntityManager, 'query'>, sql: string, params: unknown[]): Promise<R[]> {
  const result: unknown = await em.query(sql, params);
  return (Array.isArray(result) && Array.isArray(result[0]) ? result[0] : result) as R[];
}
