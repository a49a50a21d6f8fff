import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { Worker } from 'bullmq';
import { getConfig } from '../../shared/config.js';
import { closeQueues, createQueues, enqueue, requeue, type JobRequest, type Queues } from '../../shared/queues/producer.js';
import { createWorkerRedis } from '../../shared/queues/connections.js';
import { jobId } from '../../shared/queues/registry.js';
import { getDs, testRedis } from '../helpers/shared.js';
import { makeBusiness } from '../helpers/factories.js';
import { finalizeStalled } from '../../workers/runtime.js';
import pino from 'pino';

const silent = pino({ level: 'silent' });
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

  /** Enqueues `job` and lets it fail every attempt (its worker throws), so it rests in the failed set. */
  const failForGood = async (job: JobRequest<'rate.refresh'>) => {
    await enqueue(queues, job);
    const worker = new Worker('pricing', async (j) => {
      if (j.id === job.id) throw new Error('the rate source is down');
    }, { connection: createWorkerRedis(), prefix: getConfig().redisPrefix, concurrency: 4 });
    try {
      await until(async () => (await queues.pricing.getJobState(job.id)) === 'failed', { timeoutMs: 15_000, what: 'the job out of attempts' });
    } finally {
      await worker.close();
    }
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
    await failForGood(job);
    expect((await queues.pricing.getJob(job.id))!.attemptsMade).to.equal(3);
    expect(await requeue(queues, job)).to.equal('retried');
    const again = (await queues.pricing.getJob(job.id))!;
    expect(await again.getState()).to.equal('waiting');
    expect(again.attemptsMade).to.equal(0);
    await queues.pricing.remove(job.id);
  });

  it('a failed job whose hash lost its name and data (a Redis flush mid-run) is replaced, not retried into "no processor" again', async () => {
    // Fault seed 15012: a collection request's job, its hash emptied by a flush while a worker held it, failed with
    // "no processor for job undefined"; retried as it was, it failed the same way at every sweep and the on-ramp stayed created.
    const job = rateJob();
    await failForGood(job);
    await testRedis().hdel(`${getConfig().redisPrefix}:pricing:${job.id}`, 'name', 'data');
    expect((await queues.pricing.getJob(job.id))!.name).to.not.equal(job.name);
    expect(await requeue(queues, job)).to.equal('replaced');
    const again = (await queues.pricing.getJob(job.id))!;
    expect(again.name).to.equal(job.name);
    expect(again.data).to.deep.equal(job.data);
    expect(await again.getState()).to.equal('waiting');
    await queues.pricing.remove(job.id);
  });
});

describe('a job BullMQ failed for stalling runs its final-failure handler', () => {
  let queues: Queues;
  before(() => {
    queues = createQueues(createWorkerRedis());
  });
  after(() => closeQueues(queues));

  it('a quote whose pricing job stalled out is failed as when its attempts run out, not left pending; a job put back to wait is left alone', async () => {
    const ds = await getDs();
    const { businessId } = await makeBusiness();
    const [{ id: walletId }] = await ds.query(
      `INSERT INTO wallets (business_id, environment, type, chain, address, ownership_status, verified_at) VALUES ($1, 'sandbox', 'external_wallet', 'base', $2, 'verified', now()) RETURNING id`,
      [businessId, `0x${randomUUID().replace(/-/g, '').padEnd(40, '0')}`]);
    const [{ id: quoteId }] = await ds.query(
      `INSERT INTO quotes (id, business_id, environment, direction, chain, currency, payment_method, requested_side, requested_amount, status, wallet_id)
       VALUES (gen_random_uuid(), $1, 'sandbox', 'onramp', 'base', 'KES', 'mobile_money', 'source', 1500, 'pending', $2) RETURNING id`, [businessId, walletId]);
    const id = jobId('quote.price', quoteId);
    // Failed without the processor's catch (as BullMQ's stall check fails it): here by a bare worker whose job throws.
    await queues.pricing.add('quote.price', { quoteId }, { jobId: id, attempts: 1 });
    const worker = new Worker('pricing', async (j) => {
      if (j.id === id) throw new Error('job stalled more than allowable limit');
    }, { connection: createWorkerRedis(), prefix: getConfig().redisPrefix });
    try {
      await until(async () => (await queues.pricing.getJobState(id)) === 'failed', { timeoutMs: 10_000, what: 'the job failed' });
    } finally {
      await worker.close();
    }
    const deps = { config: getConfig(), ds, queues, log: silent };
    expect((await ds.query(`SELECT status FROM quotes WHERE id = $1`, [quoteId]))[0].status).to.equal('pending');
    expect(await finalizeStalled(deps, 'pricing', id)).to.equal(true);
    const [quote] = await ds.query(`SELECT status, failure FROM quotes WHERE id = $1`, [quoteId]);
    expect(quote.status).to.equal('failed');
    expect(quote.failure.code).to.equal('pricing_unavailable');
    // A stalled job moved back to wait runs again: nothing to finalize.
    const waiting = jobId('quote.price', randomUUID());
    await queues.pricing.add('quote.price', { quoteId: randomUUID() }, { jobId: waiting });
    expect(await finalizeStalled(deps, 'pricing', waiting)).to.equal(false);
    await queues.pricing.remove(waiting);
  });
});
