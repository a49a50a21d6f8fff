import { DelayedError } from 'bullmq';
import { deliverMessage, DeliveryBusy } from '../../shared/webhooks/delivery.js';
import { defineJob } from '../job-definition.js';

/**
 * One attempt at one event for one endpoint. When the endpoint (or its business) already has its share of deliveries
 * in flight, the job steps aside (back to delayed, not counted as an attempt) and the pool goes on with other deliveries.
 */
export const deliverWebhookJob = defineJob({
  name: 'webhook.deliver',
  async process(job, deps) {
    if (!deps.redis) throw new Error('webhook delivery needs the pool\'s Redis connection');
    try {
      return await deliverMessage({ ...deps, redis: deps.redis }, job.data);
    } catch (err) {
      if (!(err instanceof DeliveryBusy) || !deps.token) throw err;
      // Jittered, so waiting ones spread out.
      await job.moveToDelayed(Date.now() + err.waitMs + Math.floor(Math.random() * err.waitMs), deps.token);
      throw new DelayedError();
    }
  },
});
