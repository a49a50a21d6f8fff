import { requeue } from '../../shared/queues/producer.js';
import { STUCK_RULES } from '../../shared/domain/stuck.js';
import { defineJob } from '../job-definition.js';

const BATCH = 500;

/** Re-enqueues the jobs of rows stuck in a pending state (shared/domain/stuck.ts), under their own job ids. */
export const sweepJob = defineJob({
  name: 'engine.sweep',
  async process(_job, deps) {
    const counts: Record<string, number> = {};
    const errors: Record<string, string> = {};
    // One rule or one job that cannot be handled (a query that fails, Redis slow on one job) never keeps the sweeper
    // from the rest: the same row would otherwise come first, and stop it, on every round.
    for (const rule of STUCK_RULES) {
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
    if (Object.keys(counts).length) deps.log.warn({ requeued: counts }, 'sweeper re-enqueued stuck work');
    if (Object.keys(errors).length) deps.log.error({ errors }, 'sweeper could not re-enqueue some stuck work; the next round tries again');
    return counts;
  },
});
