import { QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import type { QueueName } from '../shared/queues/registry.js';

export interface Waiting {
  /** True once the job has finished (completed or failed), false when the time ran out first. */
  done: Promise<boolean>;
  cancel(): void;
}

/**
 * Lets a request wait briefly for a job it started (POST /quotes waits for its price), fed by BullMQ's QueueEvents
 * stream on one dedicated connection per web process: no polling of PostgreSQL, no extra Redis call per request.
 */
export class JobWaiters {
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly events: QueueEvents;

  constructor(queue: QueueName, private readonly connection: Redis, prefix: string) {
    this.events = new QueueEvents(queue, { connection, prefix });
    this.events.on('completed', ({ jobId }) => this.settle(jobId));
    this.events.on('failed', ({ jobId }) => this.settle(jobId));
    this.events.on('error', () => undefined); // Redis down: waits time out and answer `pending`
  }

  /** Register before the job is enqueued, so its end cannot be missed. */
  wait(jobId: string, timeoutMs: number): Waiting {
    let finish!: (value: boolean) => void;
    const done = new Promise<boolean>((resolve) => (finish = resolve));
    const set = this.waiters.get(jobId) ?? new Set();
    this.waiters.set(jobId, set);
    const onDone = () => {
      clearTimeout(timer);
      finish(true);
    };
    const forget = (value: boolean) => {
      clearTimeout(timer);
      set.delete(onDone);
      if (!set.size) this.waiters.delete(jobId);
      finish(value);
    };
    const timer = setTimeout(() => forget(false), timeoutMs);
    set.add(onDone);
    return { done, cancel: () => forget(false) };
  }

  private settle(jobId: string): void {
    const set = this.waiters.get(jobId);
    if (!set) return;
    this.waiters.delete(jobId);
    for (const resolve of set) resolve();
  }

  /** Never waits on Redis: a connection that is down (or never came up) would hold close() for ever. */
  async close(): Promise<void> {
    for (const set of this.waiters.values()) for (const resolve of set) resolve();
    this.waiters.clear();
    const closing = this.events.close().catch(() => undefined);
    this.connection.disconnect();
    await Promise.race([closing, new Promise((resolve) => setTimeout(resolve, 500).unref())]);
  }
}
