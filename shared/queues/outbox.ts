import type { DataSource, EntityManager } from 'typeorm';
import type { Logger } from 'pino';
import { enqueue, type JobRequest, type Queues } from './producer.js';
import { JOB_QUEUES, type JobName } from './registry.js';

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
  const rows: { id: string }[] = await em.query(
    `INSERT INTO outbox_jobs (business_id, environment, queue, job_name, job_id, payload, delay_ms)
     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
    [scope.businessId ?? null, scope.environment ?? null, JOB_QUEUES[job.name], job.name, job.id, JSON.stringify(job.data), job.delayMs ?? 0],
  );
  return { outboxId: String(rows[0].id), job };
}

/**
 * After the commit: enqueue, then mark the outbox row dispatched. A failure is logged and left for the relay;
 * the request that staged the job has already succeeded in Postgres, which is what counts.
 */
export async function dispatchStaged(ds: DataSource, queues: Queues, staged: StagedJob[], log: Logger, timeoutMs = DISPATCH_TIMEOUT_MS): Promise<void> {
  for (const item of staged) {
    try {
      await withTimeout(enqueue(queues, item.job), timeoutMs);
    } catch (err) {
      log.warn({ err: errorText(err), jobId: item.job.id }, 'enqueue failed; the outbox relay will retry');
      continue;
    }
    ds.query(`UPDATE outbox_jobs SET dispatched_at = now() WHERE id = $1`, [item.outboxId]).catch((err: unknown) =>
      log.warn({ err: errorText(err), outboxId: item.outboxId }, 'could not mark outbox row dispatched'),
    );
  }
}

/** BullMQ waits for a lost connection to come back; a request must not. */
const DISPATCH_TIMEOUT_MS = 1000;

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`enqueue did not finish within ${ms} ms`)), ms);
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
  delay_ms: number;
}

/**
 * The relay: claims undispatched rows older than the grace period (the request path normally dispatches
 * them itself within milliseconds), enqueues them, and marks them. Safe to run in many processes at once.
 * Returns how many rows it enqueued.
 */
export async function relayOutbox(ds: DataSource, queues: Queues, log: Logger, opts: { graceMs: number; batch?: number }): Promise<number> {
  return ds.transaction(async (em) => {
    const rows: OutboxRow[] = await em.query(
      `SELECT id, job_name, job_id, payload, delay_ms FROM outbox_jobs
        WHERE dispatched_at IS NULL AND created_at < now() - make_interval(secs => $1::double precision / 1000)
        ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
      [opts.graceMs, opts.batch ?? 200],
    );
    let sent = 0;
    for (const row of rows) {
      try {
        // Bounded: the worker's Redis connection waits for a lost Redis, and this transaction holds row locks.
        await withTimeout(enqueue(queues, { name: row.job_name, id: row.job_id, data: row.payload, delayMs: row.delay_ms }), DISPATCH_TIMEOUT_MS);
        await em.query(`UPDATE outbox_jobs SET dispatched_at = now(), attempts = attempts + 1 WHERE id = $1`, [row.id]);
        sent += 1;
      } catch (err) {
        await em.query(`UPDATE outbox_jobs SET attempts = attempts + 1, last_error = $2 WHERE id = $1`, [row.id, errorText(err).slice(0, 500)]);
        log.warn({ err: errorText(err), jobId: row.job_id }, 'outbox relay could not enqueue');
        break; // Redis is likely down: stop this pass and try again on the next tick.
      }
    }
    if (sent > 0) log.info({ sent }, 'outbox relay enqueued jobs that had not reached the queue');
    return sent;
  });
}
