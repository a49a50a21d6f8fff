import type { Job } from 'bullmq';
import type { JobPayloads } from '../../shared/queues/registry.js';
import type { WorkerDeps } from '../registry.js';

export type CleanupOutboxJobData = JobPayloads['outbox.cleanup'];

/** Dispatched outbox rows are only needed until their job is long done. */
export async function cleanupOutbox(job: Job<CleanupOutboxJobData>, deps: WorkerDeps): Promise<number> {
  const result: [unknown, number] = await deps.ds.query(
    `DELETE FROM outbox_jobs WHERE dispatched_at < now() - make_interval(hours => $1)`,
    [job.data.olderThanHours],
  );
  return result[1];
}
