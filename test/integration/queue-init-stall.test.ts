import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { createApiRedis, whenReady } from '../../shared/queues/connections.js';
import { closeQueues, createQueues, enqueue } from '../../shared/queues/producer.js';
import { startRedisProxy } from '../helpers/redis-proxy.js';
import { deleteKeys } from '../helpers/shared.js';

// Issue 41's "enqueue failed; the outbox relay will retry" with `Command timed out`, hundreds of times in one web
// process: BullMQ sends INFO (its Redis version check) once when a Queue is made and keeps that promise. On the web
// process's fail-fast connection (a 1 s command timeout), a Redis answer or an event loop late by a second at boot
// timed it out, and every add() on that queue then failed with the same error for the life of the process: its jobs
// went only through the outbox relay, seconds late. The producer queues skip that check (the workers make it).
describe('producer queues: a stall while a queue is made does not break it for good', () => {
  it('Redis stalled as the queues are made: once it answers again, a job is enqueued', async () => {
    const proxy = await startRedisProxy();
    const redis = createApiRedis(proxy.url, 200);
    const prefix = `${process.env.REDIS_PREFIX}-stall-${randomUUID().slice(0, 8)}`;
    try {
      expect(await whenReady(redis)).to.equal(true);
      proxy.stall();
      const queues = createQueues(redis, prefix);
      await new Promise((r) => setTimeout(r, 600));
      proxy.resume();
      try {
        const id = `quote-price-${randomUUID()}`;
        await enqueue(queues, { name: 'quote.price', id, data: { quoteId: randomUUID() } });
        expect(await queues.pricing.getJobState(id)).to.equal('waiting');
      } finally {
        await closeQueues(queues);
      }
    } finally {
      redis.disconnect();
      await proxy.close();
      await deleteKeys(`${prefix}*`);
    }
  });
});
