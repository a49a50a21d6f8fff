import type { JobPayloads } from '../../shared/queues/registry.js';
import { defineJob } from '../job-definition.js';
import { purgeRecords } from '../../shared/db/idempotency-records.js';

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

/** Idempotency records past their retention (IDEMPOTENCY_TTL_SECONDS), in batches: no long lock, no long snapshot. */
export const purgeIdempotencyJob = defineJob({
  name: 'idempotency.purge',
  async process(job, deps) {
    const deleted = await purgeRecords(deps.ds, job.data.olderThanSeconds, job.data.batch);
    if (deleted) deps.log.info({ deleted }, 'idempotency records past their retention deleted');
    return deleted;
  },
});
