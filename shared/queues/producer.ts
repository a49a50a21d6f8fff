import { Queue, type JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { getConfig } from '../config.js';
import { JOBS, POOLS, type JobName, type JobPayloads, type QueueName } from './registry.js';

export const DEFAULT_JOB_OPTIONS: JobsOptions = {
  attempts: 8,
  backoff: { type: 'exponential', delay: 1000 },
  // Completed jobs stay a day so a late duplicate enqueue with the same id stays a no-op.
  removeOnComplete: { age: 86_400, count: 50_000 },
  removeOnFail: { age: 7 * 86_400 },
};

export type Queues = Record<QueueName, Queue>;

export function createQueues(connection: Redis, prefix = getConfig().redisPrefix): Queues {
  const queues = {} as Queues;
  for (const name of POOLS) {
    // No version check: BullMQ sends it (INFO) once, when the queue is made, and keeps its answer; on the web process's
    // fail-fast connection one answer late by a second at boot made every add() on that queue fail with the same
    // `Command timed out` for the life of the process (issue 41). The workers' own connections make the check.
    queues[name] = new Queue(name, { connection, prefix, defaultJobOptions: DEFAULT_JOB_OPTIONS, skipVersionCheck: true });
    // Connection errors surface where jobs are added (the outbox keeps what did not get through).
    queues[name].on('error', () => undefined);
  }
  return queues;
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.all(Object.values(queues).map((q) => q.close()));
}

export interface JobRequest<N extends JobName = JobName> {
  name: N;
  id: string;
  data: JobPayloads[N];
  delayMs?: number;
}

/** The one enqueue helper: the job's queue, attempts and backoff come from its registry entry. */
export async function enqueue<N extends JobName>(queues: Queues, job: JobRequest<N>): Promise<void> {
  const spec = JOBS[job.name];
  // A row written by a newer release, read by an older one during a deploy: refused here, retried by the relay later.
  if (!spec) throw new Error(`unknown job name ${job.name}`);
  const config = getConfig();
  await queues[spec.queue].add(job.name, job.data, {
    jobId: job.id,
    delay: job.delayMs || undefined,
    attempts: spec.attempts === 'provider' ? config.providerMaxAttempts : spec.attempts,
    backoff: { type: 'exponential', delay: spec.backoffMs === 'provider' ? config.providerRetryBaseMs : spec.backoffMs },
  });
}

/**
 * For the sweeper: makes sure the job will run again. A job BullMQ has never seen (or has forgotten) is added, a
 * failed one retried (replaced when its hash lost its name), a completed one replaced; one waiting, delayed or running is left alone.
 */
export async function requeue<N extends JobName>(queues: Queues, job: JobRequest<N>): Promise<'added' | 'retried' | 'replaced' | 'pending'> {
  const queue = queues[JOBS[job.name].queue];
  const state = await queue.getJobState(job.id);
  if (state === 'unknown') {
    // Its hash may have outlived its place in every list (Redis lost some keys, not all): add() would keep that hash
    // and run nothing, so it goes first.
    await queue.remove(job.id);
    await enqueue(queues, job);
    return 'added';
  }
  if (state === 'failed') {
    const failed = await queue.getJob(job.id);
    // A hash Redis partly lost (a flush while a worker held it: no name, no data) can never run: replaced, not retried.
    if (!failed || failed.name !== job.name) {
      await queue.remove(job.id);
      await enqueue(queues, job);
      return 'replaced';
    }
    // With a fresh set of attempts: one that gave up used them all, and the next failure would otherwise be its last.
    // Its stall count too (BullMQ keeps it for the job's life): one failed for stalling would fail at its next cut-off.
    await (await queue.getBackend().client).hdel(queue.toKey(job.id), 'stc');
    await failed.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
    return 'retried';
  }
  if (state === 'completed') {
    await queue.remove(job.id);
    await enqueue(queues, job);
    return 'replaced';
  }
  return 'pending';
}
