// One registry of queues (one per worker pool) and of every job: its queue, payload type, attempts and backoff.
// Jobs carry ids only; the worker reloads the row from Postgres. Processors and final-failure handlers are the
// workers' half of each definition (workers/registry.ts).

export const POOLS = ['pricing', 'settlement', 'providers', 'sandbox', 'webhooks'] as const;
export type Pool = (typeof POOLS)[number];
export type QueueName = Pool;

/** Every job the system runs: name -> payload. */
export interface JobPayloads {
  /** Bookkeeping: removes outbox rows that were dispatched long ago. */
  'outbox.cleanup': { olderThanHours: number };
  /** Finds rows stuck in a pending state and enqueues their job again (same deterministic id). */
  'engine.sweep': Record<string, never>;
  /** Prices a pending quote. */
  'quote.price': { quoteId: string };
  /** Moves an available quote to expired at its expires_at. */
  'quote.expire': { quoteId: string };
}
export type JobName = keyof JobPayloads;

export interface JobSpec {
  queue: QueueName;
  /** Attempts in all, the first included. */
  attempts: number;
  /** Exponential backoff from this delay. */
  backoffMs: number;
}

export const JOBS: { [N in JobName]: JobSpec } = {
  'outbox.cleanup': { queue: 'webhooks', attempts: 3, backoffMs: 60_000 },
  'engine.sweep': { queue: 'pricing', attempts: 1, backoffMs: 1000 },
  'quote.price': { queue: 'pricing', attempts: 5, backoffMs: 200 },
  'quote.expire': { queue: 'pricing', attempts: 8, backoffMs: 1000 },
};

/** Which queue each job runs on. */
export const JOB_QUEUES: { [N in JobName]: QueueName } = Object.fromEntries(Object.entries(JOBS).map(([name, spec]) => [name, spec.queue])) as {
  [N in JobName]: QueueName;
};

/** Deterministic ids: the same business fact always maps to the same job, so a second enqueue is a no-op. */
export function jobId(name: JobName, ...parts: string[]): string {
  // BullMQ refuses ':' in custom ids (it separates its own keys): a programming error, caught before any write.
  if (parts.some((p) => p.includes(':') || p === '')) throw new Error(`job id parts must be non-empty and free of ':' (${name})`);
  return [name.replace(/\./g, '-'), ...parts].join('-');
}

export function isPool(value: string): value is Pool {
  return (POOLS as readonly string[]).includes(value);
}
