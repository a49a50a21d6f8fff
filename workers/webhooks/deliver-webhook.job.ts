import { DelayedError } from 'bullmq';
import { deliverMessage, EndpointBusy } from '../../shared/webhooks/delivery.js';
import { defineJob } from '../job-definition.js';

/** How long a delivery waits when its endpoint has its share in flight (jittered, so waiting ones spread out). */
const BUSY_WAIT_MS = 250;

/**
 * One attempt at one event for one endpoint. When the endpoint already has its share of deliveries in flight, the job
 * steps aside (back to delayed, not counted as an attempt) and the pool goes on with other endpoints' deliveries.
 */
export const deliverWebhookJob = defineJob({
  name: 'webhook.deliver',
  async process(job, deps) {
    if (!deps.redis) throw new Error('webhook delivery needs the pool\'s Redis connection');
    try {
      return await deliverMessage({ ...deps, redis: deps.redis }, job.data);
    } catch (err) {
      if (!(err instanceof EndpointBusy) || !deps.token) throw err;
      await job.moveToDelayed(Date.now() + BUSY_WAIT_MS + Math.floor(Math.random() * BUSY_WAIT_MS), deps.token);
      throw new DelayedError();
    }
  },
});
