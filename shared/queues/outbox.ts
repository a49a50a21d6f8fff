import type { DataSource, EntityManager } from 'typeorm';
import type { Logger } from 'pino';
import { enqueue, type JobRequest, type Queues } from './producer.js';
import { isDependencyDown } from '../errors.js';
import { JOB_QUEUES, type JobName } from './registry.js';
import { planOnce } from '../db/prepared-client.js';

export interface OutboxScope {
  businessId?: string | null;
  environment?: string | null;
}

export interface StagedJob {
  outboxId: string;
  job: JobRequest;
}

/**
 * Writes the job into the outbox inside the caller's transaction. Call dispatchStaged() after
 * the commit; if that never happens (crash, Redis down) the relay finds the row and enqueues it.
 */
export async function stageJob<N extends JobName>(em: EntityManager, job: JobRequest<N>, scope: OutboxScope = {}): Promise<StagedJob> {
  return (await stageJobs(em, [{ job, scope }]))[0];
}

/**
 * How staged jobs become outbox rows: its columns, the `unnest` of their parameters (the `first` and the six after it)
 * with each job's position as `o`, and those parameters. The one definition for stageJobs() and the unit of work,
 * which writes its jobs in the statement that writes its events.
 */
export const OUTBOX_COLUMNS = 'business_id, environment, queue, job_name, job_id, payload, delay_ms';
export function outboxRowsFrom(first: number): string {
  const [b, e, q, n, i, p, d] = Array.from({ length: 7 }, (_, k) => `$${first + k}`);
  return `unnest(${b}::uuid[], ${e}::text[], ${q}::text[], ${n}::text[], ${i}::text[], ${p}::jsonb[], ${d}::integer[]) WITH ORDINALITY AS j(b, e, q, n, i, p, d, o)`;
}
export function outboxParams(items: { job: JobRequest; scope: OutboxScope }[]): unknown[] {
  return [
    items.map((x) => x.scope.businessId ?? null), items.map((x) => x.scope.environment ?? null), items.map((x) => JOB_QUEUES[x.job.name]),
    items.map((x) => x.job.name), items.map((x) => x.job.id), items.map((x) => JSON.stringify(x.job.data)), items.map((x) => x.job.delayMs ?? 0),
  ];
}

/** Writes several staged jobs into the outbox with one statement, in the caller's transaction. */
export async function stageJobs(em: EntityManager, items: { job: JobRequest; scope: OutboxScope }[]): Promise<StagedJob[]> {
  if (!items.length) return [];
  const rows: { id: string }[] = await em.query(
    `INSERT INTO outbox_jobs (${OUTBOX_COLUMNS}) SELECT b, e, q, n, i, p, d FROM ${outboxRowsFrom(1)} ORDER BY o RETURNING id`,
    outboxParams(items),
  );
  return rows.map((r, i) => ({ outboxId: String(r.id), job: items[i].job }));
}

/**
 * After the commit: enqueue, then mark the outbox row dispatched. A failure is logged and left for the relay;
 * the request that staged the job has already succeeded in Postgres, which is what counts.
 */
export async function dispatchStaged(ds: DataSource, queues: Queues, staged: StagedJob[], log: Logger, timeoutMs = DISPATCH_TIMEOUT_MS): Promise<void> {
  const dispatched: string[] = [];
  // All at once: their commands share the connection's pipeline instead of waiting one round trip each.
  await Promise.all(staged.map(async (item) => {
    try {
      await withTimeout(enqueue(queues, item.job), timeoutMs);
      dispatched.push(item.outboxId);
    } catch (err) {
      log.warn({ err: errorText(err), jobId: item.job.id }, 'enqueue failed; the outbox relay will retry');
    }
  }));
  // Not awaited by the caller's answer (a row left unmarked is enqueued again by the relay: a no-op).
  if (dispatched.length) marksFor(ds, log).add(dispatched);
}

/** How often a process writes the dispatched marks it has collected: well inside the relay's grace period. */
const MARK_EVERY_MS = 250;

/**
 * The dispatched marks of every unit a process commits, written together: one UPDATE (its own transaction) every
 * MARK_EVERY_MS instead of one per unit. A mark lost to a crash only lets the relay enqueue its row again, a no-op
 * under the job's own id.
 */
class OutboxMarks {
  private ids: string[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();

  constructor(private readonly ds: DataSource, private readonly log: Logger) {}

  add(ids: string[]): void {
    this.ids.push(...ids);
    this.timer ??= setTimeout(() => void this.flush(), MARK_EVERY_MS).unref();
  }

  /** Writes what is collected now (a process shutting down calls it before closing its pool). */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const ids = this.ids;
    this.ids = [];
    if (ids.length && this.ds.isInitialized) {
      this.writing = this.writing.then(() => this.ds.query(planOnce(`UPDATE outbox_jobs SET dispatched_at = now() WHERE id = ANY($1::bigint[])`), [ids]).then(
        () => undefined,
        (err: unknown) => this.log.warn({ err: errorText(err), outboxIds: ids.length }, 'could not mark outbox rows dispatched; the relay will enqueue them again'),
      ));
    }
    return this.writing;
  }
}

const MARKS = new WeakMap<DataSource, OutboxMarks>();

function marksFor(ds: DataSource, log: Logger): OutboxMarks {
  let marks = MARKS.get(ds);
  if (!marks) MARKS.set(ds, (marks = new OutboxMarks(ds, log)));
  return marks;
}

/** Writes the dispatched marks collected so far (before a process closes its database pool). */
export function flushOutboxMarks(ds: DataSource): Promise<void> {
  return MARKS.get(ds)?.flush() ?? Promise.resolve();
}

/** BullMQ waits for a lost connection to come back; a request must not. */
const DISPATCH_TIMEOUT_MS = 1000;

/** Redis did not take the job in time: it is down or stalled (BullMQ's patient connection would wait for ever). */
class EnqueueTimeout extends Error {
  constructor(ms: number) {
    super(`enqueue did not finish within ${ms} ms`);
  }
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new EnqueueTimeout(ms)), ms);
  });
  work.catch(() => undefined); // a late failure after the timeout is already accounted for
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

interface OutboxRow {
  id: string;
  job_name: JobName;
  job_id: string;
  payload: JobRequest['data'];
  /** What is left of the job's delay, counted from when the row was written. */
  remaining_delay_ms: number;
  attempts: number;
}

/** A refused row waits 2^attempts seconds, at most this long, before the next try. It is never given up. */
const MAX_BACKOFF_SECONDS = 300;

/** The enqueue timed out or lost its connection: Redis is down, so every row after this one would fail too. */
function redisUnreachable(err: unknown): boolean {
  return err instanceof EnqueueTimeout || isDependencyDown(err);
}

/**
 * The relay: claims undispatched rows older than the grace period (the request path normally dispatches
 * them itself within milliseconds), enqueues them, and marks them. Safe to run in many processes at once.
 * A row the queue refuses (an unknown job name during a rolling deploy, a bad id) backs off on its own and the
 * pass goes on; a Redis outage ends the pass. Returns how many rows it enqueued.
 */
export async function relayOutbox(ds: DataSource, queues: Queues, log: Logger, opts: { graceMs: number; batch?: number }): Promise<number> {
  return ds.transaction(async (em) => {
    const rows: OutboxRow[] = await em.query(
      `SELECT id, job_name, job_id, payload, attempts,
              greatest(0, delay_ms - (extract(epoch FROM now() - created_at) * 1000)::bigint)::integer AS remaining_delay_ms
         FROM outbox_jobs
        WHERE dispatched_at IS NULL AND created_at < now() - make_interval(secs => $1::double precision / 1000)
          AND (next_attempt_at IS NULL OR next_attempt_at <= now())
        ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
      [opts.graceMs, opts.batch ?? 200],
    );
    let sent = 0;
    for (const row of rows) {
      try {
        // Bounded: the worker's Redis connection waits for a lost Redis, and this transaction holds row locks.
        await withTimeout(enqueue(queues, { name: row.job_name, id: row.job_id, data: row.payload, delayMs: row.remaining_delay_ms }), DISPATCH_TIMEOUT_MS);
        await em.query(`UPDATE outbox_jobs SET dispatched_at = now(), attempts = attempts + 1 WHERE id = $1`, [row.id]);
        sent += 1;
      } catch (err) {
        const down = redisUnreachable(err);
        const backoff = down ? 0 : Math.min(2 ** Math.min(row.attempts, 20), MAX_BACKOFF_SECONDS);
        await em.query(
          `UPDATE outbox_jobs SET attempts = attempts + 1, last_error = $2, next_attempt_at = now() + make_interval(secs => $3) WHERE id = $1`,
          [row.id, errorText(err).slice(0, 500), backoff],
        );
        if (down) {
          log.warn({ err: errorText(err), jobId: row.job_id }, 'outbox relay could not reach Redis; trying again next pass');
          break;
        }
        log.error({ err: errorText(err), jobId: row.job_id, jobName: row.job_name, attempts: row.attempts + 1 }, 'outbox relay: the queue refused this job; retrying it later');
      }
    }
    if (sent > 0) log.info({ sent }, 'outbox relay enqueued jobs that had not reached the queue');
    return sent;
  });
}
