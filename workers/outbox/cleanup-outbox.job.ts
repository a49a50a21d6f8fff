import type { JobPayloads } from '../../shared/queues/registry.js';
import { defineJob } from '../job-definition.js';

export type CleanupOutboxJobData = JobPayloads['outbox.cleanup'];

/** Dispatched outbox rows are only needed until their job is long done. */
export const cleanupOutboxJob = defineJob({
  name: 'outbox.cleanup',
  async process(job, deps) {
    const result: [unknown, number] = await deps.ds.query(
      `DELETE FROM outbox_jobs WHERE dispatched_at < now() - make_interval(hours => $1)`,
      [job.data.olderThanHours],
    );
    return result[1];
  },
});
