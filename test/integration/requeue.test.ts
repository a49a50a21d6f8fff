import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { Worker } from 'bullmq';
import { getConfig } from '../../shared/config.js';
import { closeQueues, createQueues, enqueue, requeue, type JobRequest, type Queues } from '../../shared/queues/producer.js';
import { createWorkerRedis } from '../../shared/queues/connections.js';
import { jobId } from '../../shared/queues/registry.js';
import { testRedis } from '../helpers/shared.js';
import { until } from '../helpers/until.js';

// The sweeper's requeue (shared/queues/producer.ts): whatever Redis kept or lost of a job, the job runs again.
describe('requeue: a stuck row\'s job runs again whatever Redis kept of it', () => {
  let queues: Queues;
  before(() => {
    queues = createQueues(createWorkerRedis());
  });
  after(() => closeQueues(queues));

  const rateJob = (): JobRequest<'rate.refresh'> => {
    const currency = `T${randomUUID().slice(0, 8)}`;
    return { name: 'rate.refresh', id: jobId('rate.refresh', 'sandbox', currency), data: { environment: 'sandbox', currency } };
  };

  it('a job whose hash outlived its place in the queue (Redis lost some keys, not all) is added again, not left as a hash', async () => {
    const job = rateJob();
    await enqueue(queues, job);
    expect(await queues.pricing.getJobState(job.id)).to.equal('waiting');
    // The wait list forgot it; its hash is still there, so add() under the same id would be a no-op.
    await testRedis().lrem(`${getConfig().redisPrefix}:pricing:wait`, 0, job.id);
    expect(await queues.pricing.getJobState(job.id)).to.equal('unknown');
    expect(await requeue(queues, job)).to.equal('added');
    expect(await queues.pricing.getJobState(job.id)).to.equal('waiting');
    await queues.pricing.remove(job.id);
  });

  it('a job that failed for good is retried with a fresh set of attempts, not one last try', async () => {
    const job = rateJob();
    await enqueue(queues, job);
    const worker = new Worker('pricing', async (j) => {
      if (j.id === job.id) throw new Error('the rate source is down');
    }, { connection: createWorkerRedis(), prefix: getConfig().redisPrefix, concurrency: 4 });
    try {
      await until(async () => (await queues.pricing.getJobState(job.id)) === 'failed', { timeoutMs: 15_000, what: 'the job out of attempts' });
    } finally {
      await worker.close();
    }
    expect((await queues.pricing.getJob(job.id))!.attemptsMade).to.equal(3);
    expect(await requeue(queues, job)).to.equal('retried');
    const again = (await queues.pricing.getJob(job.id))!;
    expect(await again.getState()).to.equal('waiting');
    expect(again.attemptsMade).to.equal(0);
    await queues.pricing.remove(job.id);
  });
});
