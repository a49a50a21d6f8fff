// What the unit of work needs of webhooks to fan its events out at commit: which endpoints take an event, and the
// first delivery job of each message. Kept apart from delivery and endpoint management, which write through units.
import type { JobRequest } from '../queues/producer.js';
import { jobId } from '../queues/registry.js';

/**
 * SQL: endpoint `w` takes an event of type `type` (an SQL expression). The one place the filter is read, for the
 * fan-out at commit and for redelivery.
 */
export const endpointTakes = (type: string) => `(w.events IS NULL OR ${type} = ANY(w.events) OR (split_part(${type}, '.', 1) || '.*') = ANY(w.events))`;

export const webhookJobs = {
  deliver: (messageId: string, endpointId: string, round: number, attempt: number, delayMs = 0): JobRequest<'webhook.deliver'> => ({
    name: 'webhook.deliver', id: jobId('webhook.deliver', messageId, String(round), String(attempt)), data: { messageId, endpointId, round, attempt }, delayMs,
  }),
};
