import { requeue } from '../../shared/queues/producer.js';
import { STUCK_RULES } from '../../shared/domain/stuck.js';
import { defineJob } from '../job-definition.js';

const BATCH = 500;

/** Re-enqueues the jobs of rows stuck in a pending state (shared/domain/stuck.ts), under their own job ids. */
export const sweepJob = defineJob({
  name: 'engine.sweep',
  async process(_job, deps) {
    const counts: Record<string, number> = {};
    for (const rule of STUCK_RULES) {
      for (const request of await rule.find(deps.ds, BATCH, deps.config)) {
        const outcome = await requeue(deps.queues, request);
        if (outcome !== 'pending') counts[rule.name] = (counts[rule.name] ?? 0) + 1;
      }
    }
    if (Object.keys(counts).length) deps.log.warn({ requeued: counts }, 'sweeper re-enqueued stuck work');
    return counts;
  },
});
