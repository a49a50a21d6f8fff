import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { Worker } from 'bullmq';
import { getConfig } from '../../shared/config.js';
import { closeQueues, createQueues, enqueue, requeue, type JobRequest, type Queues } from '../../shared/queues/producer.js';
import { createWorkerRedis } from '../../shared/queues/connections.js';
import { jobId } from '../../shared/queues/registry.js';
import { getDs, testRedis } from '../helpers/shared.js';
import { makeBusiness } from '../helpers/factories.js';
import { startPools } from '../helpers/workers.js';
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

describe('a job cut off by its worker dying runs again, and one cut off past WORKER_MAX_STALLS runs its final-failure handler', () => {
  let queues: Queues;
  before(() => {
    queues = createQueues(createWorkerRedis());
  });
  after(() => closeQueues(queues));

  const pendingQuote = async () => {
    const ds = await getDs();
    const { businessId } = await makeBusiness();
    const [{ id: walletId }] = await ds.query(
      `INSERT INTO wallets (business_id, environment, type, chain, address, ownership_status, verified_at) VALUES ($1, 'sandbox', 'external_wallet', 'base', $2, 'verified', now()) RETURNING id`,
      [businessId, `0x${randomUUID().replace(/-/g, '').padEnd(40, '0')}`]);
    const [{ id: quoteId }] = await ds.query(
      `INSERT INTO quotes (id, business_id, environment, direction, chain, currency, payment_method, requested_side, requested_amount, status, wallet_id)
       VALUES (gen_random_uuid(), $1, 'sandbox', 'onramp', 'base', 'KES', 'mobile_money', 'source', 1500, 'pending', $2) RETURNING id`, [businessId, walletId]);
    return quoteId as string;
  };
  const quoteOf = async (quoteId: string) => (await (await getDs()).query(`SELECT status, failure FROM quotes WHERE id = $1`, [quoteId]))[0];

  /**
   * Each quote's pricing job taken by a worker that then dies with it (closed without finishing, its lock left to lapse
   * after 1 s), as if already cut off `stalls[i]` times before: the job rests in `active` with no worker.
   */
  const cutOff = async (quoteIds: string[], stalls: number[]) => {
    const ids = quoteIds.map((quoteId) => jobId('quote.price', quoteId));
    const taken = new Set<string>();
    const dying = new Worker('pricing', async (j) => {
      if (!ids.includes(j.id!)) return;
      taken.add(j.id!);
      await new Promise(() => undefined);
    }, { connection: createWorkerRedis(), prefix: getConfig().redisPrefix, lockDuration: 1000, stalledInterval: 1000, concurrency: ids.length });
    for (const [i, quoteId] of quoteIds.entries()) await queues.pricing.add('quote.price', { quoteId }, { jobId: ids[i], attempts: 3 });
    await until(async () => taken.size === ids.length, { timeoutMs: 10_000, what: 'the jobs taken' });
    await dying.close(true);
    const redis = testRedis();
    for (const [i, id] of ids.entries()) await redis.hset(`${getConfig().redisPrefix}:pricing:${id}`, 'stc', String(stalls[i]));
    // The stall check's throttle (a key living one stalledInterval) an earlier worker on this queue may have left.
    await redis.del(`${getConfig().redisPrefix}:pricing:stalled-check`);
    return ids;
  };

  it('under the limit the job is priced when the stall check hands it back; at the limit the quote is failed pricing_unavailable, not left pending', async () => {
    const max = getConfig().workerMaxStalls;
    const [again, over] = [await pendingQuote(), await pendingQuote()];
    const [againJob, overJob] = await cutOff([again, over], [max - 1, max]);
    expect(await queues.pricing.getJobState(againJob)).to.equal('active');
    expect((await quoteOf(over)).status).to.equal('pending');
    // The real pool: its stall check finds both jobs without a lock and counts one more stall for each.
    const pools = await startPools(['pricing'], { env: { WORKER_LOCK_MS: '2000' } });
    try {
      await until(async () => (await quoteOf(over)).status === 'failed' && (await quoteOf(again)).status !== 'pending', { timeoutMs: 15_000, what: 'both quotes ended' });
    } finally {
      await pools.close();
    }
    expect(await queues.pricing.getJobState(againJob)).to.equal('completed');
    expect((await quoteOf(again)).status).to.equal('available');
    expect(await queues.pricing.getJobState(overJob)).to.equal('failed');
    const failed = await quoteOf(over);
    expect(failed.failure.code).to.equal('pricing_unavailable');
    const job = await queues.pricing.getJob(overJob);
    expect(job!.failedReason).to.equal('job stalled more than allowable limit');
    expect(Number(await testRedis().hget(`${getConfig().redisPrefix}:pricing:${againJob}`, 'stc'))).to.equal(max);
    // The sweeper's retry of the job failed by stalling starts its count again (BullMQ keeps it for the job's life).
    expect(await requeue(queues, { name: 'quote.price', id: overJob, data: { quoteId: over } })).to.equal('retried');
    expect(await testRedis().hget(`${getConfig().redisPrefix}:pricing:${overJob}`, 'stc')).to.equal(null);
    expect(await queues.pricing.getJobState(overJob)).to.be.oneOf(['waiting', 'active', 'completed']);
  });
});
