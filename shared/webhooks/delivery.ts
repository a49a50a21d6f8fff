import type { DataSource, EntityManager } from 'typeorm';
import type { Logger } from 'pino';
import type { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import type { Config } from '../config.js';
import { inUnit, type Unit } from '../db/unit-of-work.js';
import type { JobRequest, Queues } from '../queues/producer.js';
import { jobId, type JobPayloads } from '../queues/registry.js';
import { LIVE_SECRETS_JOIN, SECRETS_NEWEST_FIRST, SIGNING_SECRET_COLUMNS, signingSecrets, type EndpointStatus } from './endpoints.js';
import { endpointTakes, webhookJobs } from './fan-out.js';

export { webhookJobs };
import { WEBHOOK_ENDPOINT_MACHINE, WEBHOOK_MESSAGE_MACHINE, WEBHOOK_MESSAGE_STATUSES, type WebhookEndpointStatus, type WebhookMessageStatus } from '../domain/machines.js';
import { NOW, transition, type TransitionInput } from '../domain/transition.js';
import { endpointPolicy, sendWebhook, type DeliveryResult } from './http-delivery.js';
import { planOnce } from '../db/prepared-client.js';

// Delivery (CONTRACT section 10): each event row fans out, in the transaction that wrote it, to one message per
// matching endpoint, whose job the outbox gets to Redis. A delivery job signs the event per Standard Webhooks (the
// event id is the webhook-id on every attempt and redelivery), sends it, records the attempt, and schedules the next
// one on the retry schedule (or Retry-After, if longer), each attempt its own job. A 2xx ends it; a 410 disables
// the endpoint; a schedule run out marks the endpoint failing.

type Queryable = Pick<DataSource | EntityManager, 'query'>;

export interface EventRow {
  id: string;
  type: string;
  /** The events table's identity, as text: it follows the order changes to one resource happened in. */
  sequence: string;
  /** ISO 8601 UTC with microseconds, as PostgreSQL keeps it (EVENT_CREATED_AT). */
  created_at: string;
  data: Record<string, unknown>;
}

/** An events row's created_at with its microseconds (a JavaScript Date would drop three digits). */
export const eventCreatedAt = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** The columns eventView reads, from `events e`. */
export const EVENT_COLUMNS = `e.id, e.type, e.seq::text AS sequence, ${eventCreatedAt('e.created_at')} AS created_at, e.data`;

/**
 * The event as GET /events/{id} shows it, and as every delivery's body carries it. `sequence` strictly increases
 * across the events of one resource in the order its changes happened (each change's event is written after the
 * conditional update that locked the resource's row, so a later change always gets a larger one).
 */
export function eventView(row: EventRow): Record<string, unknown> {
  return { id: row.id, type: row.type, sequence: Number(row.sequence), created_at: row.created_at, data: row.data };
}

interface MessageRow {
  id: string;
  business_id: string;
  environment: 'sandbox' | 'live';
  status: 'pending' | 'delivered' | 'failed' | 'cancelled';
  round: number;
  endpoint_id: string;
  url: string;
  endpoint_status: EndpointStatus;
  /** When the endpoint's current run of failures began (null: its last delivery worked). */
  endpoint_failing_since: Date | null;
  event_id: string;
  event_type: string;
  event_sequence: string;
  event_created_at: string;
  event_data: Record<string, unknown>;
  /** The endpoint's live secrets as read, sealed (signingSecrets opens them). */
  secretRows: Record<string, unknown>[];
}

/** The message, its endpoint and event, and the endpoint's signing secrets (still sealed), in one statement. */
async function loadMessage(q: Queryable, id: string): Promise<MessageRow | undefined> {
  const rows: (MessageRow & Record<string, unknown>)[] = await q.query(
    planOnce(`SELECT m.id, m.business_id, m.environment, m.status, m.round, m.endpoint_id, w.url, w.status AS endpoint_status, w.failing_since AS endpoint_failing_since,
            e.id AS event_id, e.type AS event_type, e.seq::text AS event_sequence, ${eventCreatedAt('e.created_at')} AS event_created_at, e.data AS event_data,
            ${SIGNING_SECRET_COLUMNS}
       FROM webhook_messages m JOIN webhook_endpoints w ON w.id = m.endpoint_id JOIN events e ON e.id = m.event_id ${LIVE_SECRETS_JOIN} WHERE m.id = $1 ORDER BY ${SECRETS_NEWEST_FIRST}`),
    [id],
  );
  return rows[0] && { ...rows[0], secretRows: rows };
}

/** The signed request: `webhook-signature` carries one `v1,` signature per live secret (two during a rotation). */
export function signedHeaders(secrets: string[], eventId: string, body: string, at = new Date()): Record<string, string> {
  return {
    'webhook-id': eventId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': secrets.map((s) => new Webhook(s).sign(eventId, at, body)).join(' '),
  };
}

/** Up to a fifth either way, so endpoints that failed together do not all come back at the same instant. */
function jittered(ms: number): number {
  return Math.round(ms * (0.8 + Math.random() * 0.4));
}

/** How long before the next attempt, or null when the schedule has run out. Retry-After wins when it asks for longer. */
export function nextDelayMs(schedule: number[], attempt: number, retryAfterSeconds: number | null): number | null {
  if (attempt > schedule.length) return null;
  return Math.max(jittered(schedule[attempt - 1]), (retryAfterSeconds ?? 0) * 1000);
}

export interface DeliveryDeps {
  ds: DataSource;
  redis: Redis;
  queues: Queues;
  log: Logger;
  config: Config;
}

/** Another delivery may not start now: its endpoint, or its business, already has its share in flight. */
export class DeliveryBusy extends Error {
  /** How long to step aside: a business's share frees more slowly than one endpoint's (its slow endpoints hold it). */
  constructor(message: string, readonly waitMs = 250) {
    super(message);
  }
}

const BUSINESS_BUSY_WAIT_MS = 1000;

/** Which business an endpoint belongs to (it never changes), so a busy business's deliveries step aside unread. */
const businessOfEndpoint = new Map<string, string>();
function rememberBusiness(endpointId: string, businessId: string): void {
  if (businessOfEndpoint.size >= 10_000) businessOfEndpoint.clear();
  businessOfEndpoint.set(endpointId, businessId);
}

export type Sender = typeof sendWebhook;

/**
 * One attempt: the message's event, signed and sent to its endpoint within the endpoint's concurrency share (a slot
 * leased in Redis, so a slow endpoint holds only its own share of the pool), then recorded.
 */
export async function deliverMessage(deps: DeliveryDeps, data: JobPayloads['webhook.deliver'], send: Sender = sendWebhook): Promise<string> {
  const member = `${data.messageId}:${data.round}:${data.attempt}`;
  const take = async (endpointId: string) => {
    const slot = await EndpointSlots.take(deps, endpointId, member);
    if (!slot) throw new DeliveryBusy(`endpoint ${endpointId} has ${deps.config.webhooks.endpointConcurrency} deliveries in flight`);
    return slot;
  };
  const takeBusiness = async (businessId: string) => {
    const slot = await BusinessSlots.take(deps, businessId, member);
    if (!slot) throw new DeliveryBusy(`business ${businessId} has ${deps.config.webhooks.businessConcurrency} deliveries in flight`, BUSINESS_BUSY_WAIT_MS);
    return slot;
  };
  let slot: Slot | undefined;
  let businessSlot: Slot | undefined;
  let message: MessageRow | undefined;
  let result: DeliveryResult;
  try {
    // The endpoint's slot (and its business's, when this process has seen that endpoint) before the message, when the
    // job names the endpoint: a delivery that has to wait for its share steps aside without a database read.
    if (data.endpointId) {
      slot = await take(data.endpointId);
      const known = businessOfEndpoint.get(data.endpointId);
      if (known) businessSlot = await takeBusiness(known);
    }
    message = await loadMessage(deps.ds, data.messageId);
    if (!message || message.status !== 'pending' || message.round !== data.round) return `moved on (${message?.status ?? 'gone'})`;
    if (message.endpoint_status === 'disabled' || message.endpoint_status === 'deleted') {
      const { endpoint_status: status } = message;
      await inUnit(deps, (unit) => moveMessage(unit, message!, 'cancelled', {}, `endpoint_${status}`));
      return `cancelled (endpoint ${status})`;
    }
    slot ??= await take(message.endpoint_id);
    // And within its business's share (WEBHOOK_BUSINESS_CONCURRENCY): one business's slow endpoints never fill the pool.
    rememberBusiness(message.endpoint_id, message.business_id);
    businessSlot ??= await takeBusiness(message.business_id);
    const body = JSON.stringify(eventView({ id: message.event_id, type: message.event_type, sequence: message.event_sequence, created_at: message.event_created_at, data: message.event_data }));
    const headers = signedHeaders(signingSecrets(message.secretRows, deps.config.encryptionKeys), message.event_id, body);
    result = await send({ url: message.url, headers, body, timeoutMs: deps.config.webhooks.timeoutMs, policy: endpointPolicy(deps.config, message.environment) });
  } finally {
    await Promise.all([slot?.release(), businessSlot?.release()]);
  }
  const sent = message;
  return inUnit(deps, (unit) => recordAttempt(unit, deps.config, sent, data, result));
}

async function recordAttempt(unit: Unit, config: Config, message: MessageRow, data: { round: number; attempt: number }, result: DeliveryResult): Promise<string> {
  const ok = result.statusCode !== null && result.statusCode >= 200 && result.statusCode < 300;
  const gone = result.statusCode === 410;
  const delay = ok || gone ? null : nextDelayMs(config.webhooks.retryScheduleMs, data.attempt, result.retryAfterSeconds);
  const nextAt = delay === null ? null : new Date(Date.now() + delay);
  const attempt = [message.id, message.endpoint_id, message.event_id, message.event_type, message.business_id, message.environment, data.attempt, result.statusCode,
    Math.round(result.latencyMs), result.error, nextAt];
  if (ok) {
    // The attempt recorded and the message delivered in one statement, the move made only while the message is still
    // in this round (a redelivery started a new one meanwhile: this attempt is history; the new round decides).
    const moved = await moveMessage(unit, message, 'delivered', { attempts: data.attempt, next_attempt_at: null, delivered_at: NOW }, undefined, {
      unchanged: { round: data.round }, alongside: { insert: (first) => attemptInsert(first), params: attempt },
    });
    if (!moved) return 'attempt recorded; the message had moved on (a redelivery, or another attempt)';
    // Any success means the endpoint works again (a healthy endpoint's row is not touched: deliveries never queue on it).
    if (message.endpoint_status === 'failing') await moveEndpoint(unit, message, 'enabled', { failing_since: null }, 'delivered');
    else if (message.endpoint_failing_since) await unit.em.query(`UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL`, [message.endpoint_id]);
    return 'delivered';
  }
  // The attempt recorded, and the message locked with its round read, in one statement. A redelivery started a new
  // round meanwhile: this attempt is history; the new round decides the message's status.
  const [current]: { round: number }[] = await unit.em.query(
    planOnce(`WITH attempt AS (${attemptInsert(1)}) SELECT round FROM webhook_messages WHERE id = $1 FOR UPDATE`),
    attempt,
  );
  if (current.round !== data.round) return 'superseded by a redelivery';
  if (gone) {
    await moveMessage(unit, message, 'failed', { attempts: data.attempt, next_attempt_at: null }, 'gone');
    await moveEndpoint(unit, message, 'disabled', { disabled_reason: 'The endpoint answered 410 Gone.' }, 'gone');
    return 'endpoint disabled (410)';
  }
  await unit.em.query(`UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, now()) WHERE id = $1`, [message.endpoint_id]);
  if (delay !== null) {
    // Still pending: not a status change, only the attempt count and the next attempt's time.
    await unit.em.query(`UPDATE webhook_messages SET attempts = $2, next_attempt_at = $3, updated_at = now() WHERE id = $1`, [message.id, data.attempt, nextAt]);
    await unit.stage(webhookJobs.deliver(message.id, message.endpoint_id, data.round, data.attempt + 1, delay), { businessId: message.business_id, environment: message.environment });
    return `retry in ${delay} ms`;
  }
  await moveMessage(unit, message, 'failed', { attempts: data.attempt, next_attempt_at: null }, 'schedule_exhausted');
  // The whole schedule (about 3 days) without a success since it started failing: its owner sees `failing`.
  await moveEndpoint(unit, message, 'failing', {}, 'schedule_exhausted');
  return 'failed';
}

/** An attempt's row, its eleven parameters numbered from `first`. */
function attemptInsert(first: number): string {
  return `INSERT INTO webhook_deliveries (message_id, endpoint_id, event_id, event_type, business_id, environment, attempt, status_code, latency_ms, error, next_retry_at)
       VALUES (${Array.from({ length: 11 }, (_, i) => `$${first + i}`).join(', ')})`;
}

const scopeOf = (message: MessageRow) => ({ businessId: message.business_id, environment: message.environment });

function moveMessage(
  unit: Unit, message: MessageRow, to: WebhookMessageStatus, set: Record<string, unknown>, reason?: string,
  also: Pick<TransitionInput<WebhookMessageStatus, MessageRow>, 'unchanged' | 'alongside'> = {},
) {
  return transition<WebhookMessageStatus, MessageRow>(unit, WEBHOOK_MESSAGE_MACHINE, { scope: scopeOf(message), id: message.id, to, expected: message.status, set, reason, view: () => ({}), ...also });
}

function moveEndpoint(unit: Unit, message: MessageRow, to: WebhookEndpointStatus, set: Record<string, unknown>, reason: string) {
  return transition<WebhookEndpointStatus, Record<string, unknown>>(unit, WEBHOOK_ENDPOINT_MACHINE, { scope: scopeOf(message), id: message.endpoint_id, to, expected: message.endpoint_status, set, reason, view: () => ({}) });
}

/**
 * Leases of in-flight deliveries per endpoint, in Redis (a sorted set of lease expiries), shared by every webhooks
 * worker. A worker killed mid-delivery leaves a lease that lapses after the timeout.
 */
const TAKE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[3]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[4]) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
  redis.call('PEXPIREAT', KEYS[1], ARGV[2])
  return 1
end
return 0`;

interface Slot {
  release(): Promise<void>;
}

async function takeSlot(deps: DeliveryDeps, key: string, member: string, max: number): Promise<Slot | null> {
  const redis = deps.redis;
  const now = Date.now();
  const taken = await redis.eval(TAKE, 1, key, String(now), String(now + deps.config.webhooks.timeoutMs + 5000), member, String(max));
  if (taken !== 1) return null;
  return { release: async () => void (await redis.zrem(key, member).catch(() => undefined)) };
}

export const EndpointSlots = {
  take: (deps: DeliveryDeps, endpointId: string, member: string): Promise<Slot | null> =>
    takeSlot(deps, `${deps.config.redisPrefix}:webhook-slots:${endpointId}`, member, deps.config.webhooks.endpointConcurrency),
};

/** The same leases per business, across its endpoints. */
export const BusinessSlots = {
  take: (deps: DeliveryDeps, businessId: string, member: string): Promise<Slot | null> =>
    takeSlot(deps, `${deps.config.redisPrefix}:webhook-business-slots:${businessId}`, member, deps.config.webhooks.businessConcurrency),
};

/**
 * POST /events/{id}/redeliver: a new round for each endpoint that takes the event (or the one named), whatever became
 * of the earlier rounds; the webhook-id stays the event's id. Answers the endpoints it queued for.
 */
export async function redeliverEvent(unit: Unit, scope: { businessId: string; environment: 'sandbox' | 'live' }, eventId: string, endpointId?: string): Promise<string[]> {
  // Every endpoint that takes the event gets a message (one registered after the event has none yet), then each of
  // them starts its next round through the message machine.
  const targets = `SELECT e.id AS event_id, w.id AS endpoint_id FROM events e
      JOIN webhook_endpoints w ON w.business_id = e.business_id AND w.environment = e.environment AND w.status IN ('enabled', 'failing')
     WHERE e.id = $1 AND e.business_id = $2 AND e.environment = $3 AND ($4::uuid IS NULL OR w.id = $4) AND ${endpointTakes('e.type')}`;
  const params = [eventId, scope.businessId, scope.environment, endpointId ?? null];
  await unit.em.query(
    `INSERT INTO webhook_messages (event_id, endpoint_id, business_id, environment) SELECT event_id, endpoint_id, $2, $3 FROM (${targets}) t
     ON CONFLICT (event_id, endpoint_id) DO NOTHING`,
    params,
  );
  const rows: { id: string; round: number; endpoint_id: string }[] = await unit.em.query(
    `SELECT m.id, m.round, m.endpoint_id FROM webhook_messages m JOIN (${targets}) t USING (event_id, endpoint_id)`, params,
  );
  const queued: string[] = [];
  for (const row of rows) {
    const moved = await transition<WebhookMessageStatus, { round: number }>(unit, WEBHOOK_MESSAGE_MACHINE, {
      scope, id: row.id, to: 'pending', expected: WEBHOOK_MESSAGE_STATUSES, set: { round: row.round + 1, attempts: 0, next_attempt_at: null, delivered_at: null }, reason: 'redeliver', view: () => ({}),
    });
    if (!moved) continue;
    await unit.stage(webhookJobs.deliver(row.id, row.endpoint_id, row.round + 1, 1), scope);
    queued.push(row.endpoint_id);
  }
  return queued;
}

/** The type of an endpoint's test event: sent to that endpoint alone, never listed by GET /events. */
export const TEST_EVENT_TYPE = 'webhook.test';

/**
 * POST /webhook-endpoints/{id}/test: a signed `webhook.test` event for that endpoint alone (its own message, its
 * delivery job staged with the caller's unit), delivered and recorded like any other. Answers the event's id.
 */
export async function sendTestEvent(unit: Unit, scope: { businessId: string; environment: 'sandbox' | 'live' }, endpointId: string): Promise<string> {
  const [message]: { id: string; event_id: string }[] = await unit.em.query(
    `WITH ev AS (
       INSERT INTO events (business_id, environment, type, data, created_at)
       VALUES ($1, $2, '${TEST_EVENT_TYPE}', jsonb_build_object('webhook_endpoint_id', $3::text), clock_timestamp()) RETURNING id)
     INSERT INTO webhook_messages (event_id, endpoint_id, business_id, environment) SELECT ev.id, $4::uuid, $1, $2 FROM ev RETURNING id, event_id`,
    [scope.businessId, scope.environment, endpointId, endpointId],
  );
  await unit.stage(webhookJobs.deliver(message.id, endpointId, 0, 1), scope);
  return message.event_id;
}
