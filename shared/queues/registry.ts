// One registry of queues (one per worker pool) and of every job: its queue and its payload type.
// Jobs carry ids only; the worker reloads the row from Postgres.

export const POOLS = ['pricing', 'settlement', 'providers', 'sandbox', 'webhooks'] as const;
export type Pool = (typeof POOLS)[number];
export type QueueName = Pool;

/** Every job the system runs: name -> payload. Later features add their entries here. */
export interface JobPayloads {
  /** Bookkeeping: removes outbox rows that were dispatched long ago. */
  'outbox.cleanup': { olderThanHours: number };
}
export type JobName = keyof JobPayloads;

/** Which queue each job runs on. */
export const JOB_QUEUES: { [N in JobName]: QueueName } = {
  'outbox.cleanup': 'webhooks',
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
