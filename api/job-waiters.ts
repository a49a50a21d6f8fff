import { QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import type { QueueName } from '../shared/queues/registry.js';

/** A job's end as its events said: `returned` is what a completed job answered (undefined for a failed one). */
export interface JobEnd {
  returned: unknown;
}

export interface Waiting {
  /** The job's end once it has finished (completed or failed), undefined when the time ran out first. */
  done: Promise<JobEnd | undefined>;
  cancel(): void;
}

/**
 * Lets a request wait briefly for a job it started (POST /quotes waits for its price), fed by BullMQ's QueueEvents
 * stream on one dedicated connection per web process: no polling of PostgreSQL, no extra Redis call per request.
 */
export class JobWaiters {
  private readonly waiters = new Map<string, Set<(end: JobEnd) => void>>();
  private readonly events: QueueEvents;

  constructor(queue: QueueName, private readonly connection: Redis, prefix: string) {
    this.events = new QueueEvents(queue, { connection, prefix });
    this.events.on('completed', ({ jobId, returnvalue }) => this.settle(jobId, { returned: returnvalue }));
    this.events.on('failed', ({ jobId }) => this.settle(jobId, { returned: undefined }));
    this.events.on('error', () => undefined); // Redis down: waits time out and answer `pending`
  }

  /** Register before the job is enqueued, so its end cannot be missed. */
  wait(jobId: string, timeoutMs: number): Waiting {
    let finish!: (value: JobEnd | undefined) => void;
    const done = new Promise<JobEnd | undefined>((resolve) => (finish = resolve));
    const set = this.waiters.get(jobId) ?? new Set();
    this.waiters.set(jobId, set);
    const onDone = (end: JobEnd) => {
      clearTimeout(timer);
      finish(end);
    };
    const forget = (value: JobEnd | undefined) => {
      clearTimeout(timer);
      set.delete(onDone);
      if (!set.size) this.waiters.delete(jobId);
      finish(value);
    };
    const timer = setTimeout(() => forget(undefined), timeoutMs);
    set.add(onDone);
    return { done, cancel: () => forget(undefined) };
  }

  private settle(jobId: string, end: JobEnd): void {
    const set = this.waiters.get(jobId);
    if (!set) return;
    this.waiters.delete(jobId);
    for (const resolve of set) resolve(end);
  }

  /** Never waits on Redis: a connection that is down (or never came up) would hold close() for ever. */
  async close(): Promise<void> {
    for (const set of this.waiters.values()) for (const resolve of set) resolve({ returned: undefined });
    this.waiters.clear();
    const closing = this.events.close().catch(() => undefined);
    this.connection.disconnect();
    await Promise.race([closing, new Promise((resolve) => setTimeout(resolve, 500).unref())]);
  }
}
