import { requeue } from '../../shared/queues/producer.js';
import { flushOutboxMarks } from '../../shared/queues/outbox.js';
import { EXPIRY_RULES, STUCK_RULES, type StuckRule } from '../../shared/domain/stuck.js';
import { defineJob, type WorkerDeps } from '../job-definition.js';

const BATCH = 500;

/**
 * Enqueues again, under their own ids, the jobs the rules' rows need; answers how many per rule were not already
 * waiting. One rule or one job that cannot be handled (a query that fails, Redis slow on one job) never keeps the rest
 * from running: the same row would otherwise come first, and stop it, on every round.
 */
async function requeueFound(rules: StuckRule[], deps: WorkerDeps): Promise<{ counts: Record<string, number>; errors: Record<string, string> }> {
  const counts: Record<string, number> = {};
  const errors: Record<string, string> = {};
  for (const rule of rules) {
    try {
      for (const request of await rule.find(deps.ds, BATCH, deps.config)) {
        const outcome = await requeue(deps.queues, request).catch((err: unknown) => {
          errors[rule.name] = (err as Error).message;
          return 'pending' as const;
        });
        if (outcome !== 'pending') counts[rule.name] = (counts[rule.name] ?? 0) + 1;
      }
    } catch (err) {
      errors[rule.name] = (err as Error).message;
    }
  }
  if (Object.keys(errors).length) deps.log.error({ errors }, 'could not enqueue some due or stuck work; the next round tries again');
  return { counts, errors };
}

/** Re-enqueues the jobs of rows stuck in a pending state (shared/domain/stuck.ts), under their own job ids. */
export const sweepJob = defineJob({
  name: 'engine.sweep',
  async process(_job, deps) {
    // Its outbox rules read dispatched rows: this process's own marks, collected for their next write, go first.
    await flushOutboxMarks(deps.ds);
    const { counts } = await requeueFound(STUCK_RULES, deps);
    if (Object.keys(counts).length) deps.log.warn({ requeued: counts }, 'sweeper re-enqueued stuck work');
    return counts;
  },
});

/** Every second: the expiry of the quotes whose expires_at has passed. */
export const expireQuotesJob = defineJob({
  name: 'expiry.quotes',
  async process(_job, deps) {
    return (await requeueFound([EXPIRY_RULES.quotes], deps)).counts;
  },
});

/** Every second: the expiry of the settlements still awaiting their transfer past their expires_at. */
export const expireSettlementsJob = defineJob({
  name: 'expiry.settlements',
  async process(_job, deps) {
    return (await requeueFound([EXPIRY_RULES.settlements], deps)).counts;
  },
});
