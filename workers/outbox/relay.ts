import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import type { Queues } from '../../shared/queues/producer.js';
import { relayOutbox } from '../../shared/queues/outbox.js';

/**
 * Polls the outbox in every worker process (FOR UPDATE SKIP LOCKED keeps them from colliding) and enqueues
 * the jobs whose request-path enqueue never happened. Returns a stop function that waits for the pass in progress.
 */
export function startOutboxRelay(ds: DataSource, queues: Queues, log: Logger, opts: { pollMs: number; graceMs: number }): () => Promise<void> {
  let stopped = false;
  let running: Promise<unknown> = Promise.resolve();
  const tick = (): void => {
    if (stopped) return;
    running = relayOutbox(ds, queues, log, { graceMs: opts.graceMs })
      .catch((err: unknown) => log.warn({ err: (err as Error).message }, 'outbox relay pass failed'))
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, opts.pollMs);
      });
  };
  let timer = setTimeout(tick, opts.pollMs);
  return async () => {
    stopped = true;
    clearTimeout(timer);
    await running;
  };
}
