import { AppError } from '../../shared/errors.js';
import { findScoped, listPage, scopedWhere, type PageQuery } from '../../shared/db/pagination.js';
import { EVENT_TYPES } from '../../shared/domain/machines.js';
import {
  createEndpoint, deleteEndpoint, ENDPOINT_COLUMNS, ENDPOINT_STATUSES, endpointView, EVENT_FILTERS, findEndpoint, MAX_ENDPOINTS, rotateSecret,
  type CreateEndpointInput, type EndpointRow,
} from '../../shared/webhooks/endpoints.js';
import { EVENT_COLUMNS, eventView, redeliverEvent, sendTestEvent, TEST_EVENT_TYPE, type EventRow } from '../../shared/webhooks/delivery.js';
import { checkEndpointUrl, endpointPolicy } from '../../shared/webhooks/http-delivery.js';
import { listOf, paginationQuery } from '../openapi/components.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';

const NULLABLE_TIME = { type: ['string', 'null'], format: 'date-time' };
const TIME = { type: 'string', format: 'date-time' };

export const schemas: Record<string, JsonSchema> = {
  Event: {
    type: 'object',
    required: ['id', 'type', 'sequence', 'created_at', 'data'],
    properties: {
      id: { ...ref('Uuid'), description: 'Also the `webhook-id` of every delivery of this event.' },
      type: { type: 'string', enum: [...EVENT_TYPES, TEST_EVENT_TYPE], description: '`webhook.test`: an endpoint\'s test event (POST /webhook-endpoints/{id}/test), never listed.' },
      sequence: {
        type: 'integer', minimum: 1,
        description: 'Strictly increases across the events of one resource (`data.id`), in the order its changes happened: keep the event with the largest `sequence` per resource and drop an older one that arrives after it.',
      },
      created_at: { type: 'string', format: 'date-time', description: 'ISO 8601 UTC with microseconds (6 fractional digits).' },
      data: { type: 'object', description: 'The resource as it stood after the change, as its own GET shows it.' },
    },
  },
  EventList: listOf('Event'),
  WebhookTest: {
    type: 'object',
    required: ['event_id', 'webhook_endpoint_id'],
    properties: { event_id: { ...ref('Uuid'), description: 'The test event\'s id: the `webhook-id` of its delivery.' }, webhook_endpoint_id: ref('Uuid') },
  },
  CreateWebhookEndpointRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['url'],
    properties: {
      url: { type: 'string', minLength: 1, maxLength: 2048, description: 'https, on a public address (sandbox with WEBHOOKS_ALLOW_LOOPBACK=true: http and loopback too).' },
      events: {
        type: 'array', minItems: 1, maxItems: 64, uniqueItems: true, items: { type: 'string', enum: [...EVENT_FILTERS] },
        description: 'Event types, or wildcards such as `transaction.*`; omitted or `*`: every type.',
      },
      description: { type: 'string', minLength: 1, maxLength: 500 },
    },
  },
  WebhookEndpoint: {
    type: 'object',
    required: ['id', 'url', 'description', 'events', 'status', 'failing_since', 'disabled_reason', 'created_at', 'updated_at'],
    properties: {
      id: ref('Uuid'),
      url: { type: 'string' },
      description: { type: ['string', 'null'] },
      events: { type: 'array', items: { type: 'string' } },
      status: {
        type: 'string', enum: [...ENDPOINT_STATUSES],
        description: '`failing`: deliveries have failed through the whole retry schedule (about 3 days); still delivered to, and `enabled` again at the first success. `disabled`: it answered 410.',
      },
      failing_since: { ...NULLABLE_TIME, description: 'When deliveries started failing (null after a success).' },
      disabled_reason: { type: ['string', 'null'] },
      secret: { type: 'string', pattern: '^whsec_', description: 'Only in the answer to creation and rotation (a replay with the same Idempotency-Key omits it): the signing secret (Standard Webhooks). Store it; it is not shown again.' },
      created_at: ref('Timestamp'),
      updated_at: ref('Timestamp'),
    },
  },
  WebhookEndpointList: listOf('WebhookEndpoint'),
  WebhookDelivery: {
    type: 'object',
    required: ['id', 'event_id', 'event_type', 'attempt', 'status_code', 'latency_ms', 'error', 'next_retry_at', 'created_at'],
    properties: {
      id: ref('Uuid'),
      event_id: ref('Uuid'),
      event_type: { type: 'string' },
      attempt: { type: 'integer', minimum: 1 },
      status_code: { type: ['integer', 'null'], description: 'Null when no answer came (timeout, refused connection, refused address).' },
      latency_ms: { type: 'integer' },
      error: { type: ['string', 'null'] },
      next_retry_at: { ...NULLABLE_TIME, description: 'When the next attempt is due; null once delivered, or when no attempt is left.' },
      created_at: ref('Timestamp'),
    },
  },
  WebhookDeliveryList: listOf('WebhookDelivery'),
  RedeliverEventRequest: {
    type: 'object',
    additionalProperties: false,
    properties: { endpoint_id: { ...ref('Uuid'), description: 'Only to this endpoint; default: every endpoint that takes the event.' } },
  },
  Redelivery: {
    type: 'object',
    required: ['event_id', 'endpoint_ids'],
    properties: { event_id: ref('Uuid'), endpoint_ids: { type: 'array', items: ref('Uuid') } },
  },
};

const byId = (params: unknown) => (params as { id: string }).id;

interface EventQuery extends PageQuery {
  type?: string;
  created_gte?: string;
  created_lte?: string;
}


export const routes: RouteDef[] = [
  {
    method: 'get',
    path: '/events',
    operationId: 'listEvents',
    summary: 'List events, newest first.',
    description: 'Every state change writes one, in the same database transaction: transactions, settlements, quotes, payment intents, treasury deposits, wallet verification.',
    tag: 'Events',
    scope: 'webhooks:read',
    query: {
      ...paginationQuery,
      type: { schema: { type: 'string', enum: [...EVENT_FILTERS] }, description: 'An event type, or a wildcard such as `transaction.*` (`*`: every type).' },
      created_gte: { schema: TIME, description: 'Created at or after this instant.' },
      created_lte: { schema: TIME, description: 'Created at or before this instant.' },
    },
    responses: { '200': { description: 'A page of events.', schema: ref('EventList') } },
    handler: async ({ deps, auth, query }) => {
      const q = query as EventQuery;
      const type = q.type === '*' ? undefined : q.type;
      const wildcard = type?.endsWith('.*');
      const filters = { ...q, type: wildcard ? undefined : type, resource: wildcard ? type!.slice(0, -2) : undefined };
      const { where, params } = scopedWhere('e', auth, filters, [
        ['type', 'e.type = $'], ['resource', `split_part(e.type, '.', 1) = $`], ['created_gte', 'e.created_at >= $'], ['created_lte', 'e.created_at <= $'],
      ]);
      // An endpoint's test event is that endpoint's alone: never listed.
      where.push(`e.type <> '${TEST_EVENT_TYPE}'`);
      const page = await listPage<EventRow & { cursor_ts: string }, unknown>(deps.ds, { columns: EVENT_COLUMNS, from: 'events e', alias: 'e', where, params }, q, eventView);
      return { status: 200, body: page };
    },
  },
  {
    method: 'get',
    path: '/events/{id}',
    operationId: 'getEvent',
    summary: 'Retrieve an event: exactly the body its webhook deliveries carry.',
    tag: 'Events',
    scope: 'webhooks:read',
    pathParams: { id: uuidParam },
    responses: { '200': { description: 'The event.', schema: ref('Event') } },
    handler: async ({ deps, auth, params }) => ({
      status: 200,
      body: eventView(await findScoped<EventRow>(deps.ds, { from: 'events e', columns: EVENT_COLUMNS, resource: 'event' }, auth, byId(params))),
    }),
  },
  {
    method: 'post',
    path: '/events/{id}/redeliver',
    operationId: 'redeliverEvent',
    errors: ['invalid_state'],
    summary: 'Deliver an event again.',
    description:
      'Answers 202 and starts a new round of attempts to every endpoint that takes the event (or the one named), with the same `webhook-id`. ' +
      'No enabled endpoint takes it: 409 `invalid_state`.',
    tag: 'Events',
    scope: 'webhooks:write',
    pathParams: { id: uuidParam },
    body: { schema: ref('RedeliverEventRequest'), required: false, examples: { all: { summary: 'To every endpoint that takes it', value: {} } } },
    responses: { '202': { description: 'Queued for these endpoints.', schema: ref('Redelivery') } },
    handler: async ({ auth, params, body, reply }) => {
      const eventId = byId(params);
      return reply(async (unit) => {
        await findScoped(unit.em, { from: 'events e', columns: 'e.id', resource: 'event' }, auth, eventId);
        const endpointId = (body as { endpoint_id?: string } | undefined)?.endpoint_id;
        if (endpointId) await findEndpoint(unit.em, auth, endpointId);
        const queued = await redeliverEvent(unit, auth, eventId, endpointId);
        if (!queued.length) throw AppError.invalidState('No enabled webhook endpoint takes this event.', { event_id: eventId });
        return { status: 202, body: { event_id: eventId, endpoint_ids: queued } };
      });
    },
  },
  {
    method: 'post',
    path: '/webhook-endpoints',
    operationId: 'createWebhookEndpoint',
    errors: ['invalid_state'],
    summary: 'Register a webhook endpoint.',
    description:
      `Answers 201 with the endpoint and its \`secret\` (shown this once). The URL must be https and resolve only to public addresses (checked again at every delivery, ` +
      `against the address actually connected to); else 400. At most ${MAX_ENDPOINTS} per environment (409 \`invalid_state\`).`,
    tag: 'Webhooks',
    scope: 'webhooks:write',
    body: {
      schema: ref('CreateWebhookEndpointRequest'),
      examples: {
        transactions: { summary: 'Transactions and payment intents', value: { url: 'https://hooks.example.com/rampway', events: ['transaction.*', 'payment_intent.completed'] } },
        local: { summary: 'Sandbox, a receiver on your machine (needs WEBHOOKS_ALLOW_LOOPBACK=true)', value: { url: 'http://127.0.0.1:4000/webhooks', description: 'local receiver' } },
      },
    },
    responses: { '201': { description: 'The endpoint, with its secret.', schema: ref('WebhookEndpoint') } },
    handler: async ({ deps, auth, body, reply }) => {
      const input = body as CreateEndpointInput;
      const url = await checkEndpointUrl(input.url, endpointPolicy(deps.config, auth.environment));
      return reply(async (unit) => {
        const { row, secret } = await createEndpoint(unit, deps.config.encryptionKeys, auth, url, input);
        return { status: 201, body: endpointView(row, secret), replayBody: endpointView(row) };
      });
    },
  },
  {
    method: 'get',
    path: '/webhook-endpoints',
    operationId: 'listWebhookEndpoints',
    summary: 'List webhook endpoints, newest first.',
    tag: 'Webhooks',
    scope: 'webhooks:read',
    query: { ...paginationQuery },
    responses: { '200': { description: 'A page of endpoints (deleted ones are not listed).', schema: ref('WebhookEndpointList') } },
    handler: async ({ deps, auth, query }) => {
      const { where, params } = scopedWhere('w', auth, {}, []);
      where.push(`w.status <> 'deleted'`);
      const page = await listPage<EndpointRow & { cursor_ts: string }, unknown>(deps.ds, { columns: ENDPOINT_COLUMNS, from: 'webhook_endpoints w', alias: 'w', where, params }, query as PageQuery, (r) => endpointView(r));
      return { status: 200, body: page };
    },
  },
  {
    method: 'get',
    path: '/webhook-endpoints/{id}',
    operationId: 'getWebhookEndpoint',
    summary: 'Retrieve a webhook endpoint, with its status (`failing` after failed deliveries through the whole retry schedule).',
    tag: 'Webhooks',
    scope: 'webhooks:read',
    pathParams: { id: uuidParam },
    responses: { '200': { description: 'The endpoint (without its secret).', schema: ref('WebhookEndpoint') } },
    handler: async ({ deps, auth, params }) => ({ status: 200, body: endpointView(await findEndpoint(deps.ds, auth, byId(params))) }),
  },
  {
    method: 'delete',
    path: '/webhook-endpoints/{id}',
    operationId: 'deleteWebhookEndpoint',
    summary: 'Delete a webhook endpoint: nothing more is delivered to it.',
    tag: 'Webhooks',
    scope: 'webhooks:write',
    pathParams: { id: uuidParam },
    responses: { '200': { description: 'The deleted endpoint (`status: deleted`).', schema: ref('WebhookEndpoint') } },
    handler: async ({ auth, params, reply }) => reply(async (unit) => ({ status: 200, body: endpointView(await deleteEndpoint(unit, auth, byId(params))) })),
  },
  {
    method: 'post',
    path: '/webhook-endpoints/{id}/rotate-secret',
    operationId: 'rotateWebhookSecret',
    summary: 'Replace the signing secret; the old one keeps signing for 24 h.',
    description: 'Answers 200 with the endpoint and its new `secret` (shown this once). For 24 hours deliveries carry both signatures, so receivers can switch without losing one.',
    tag: 'Webhooks',
    scope: 'webhooks:write',
    pathParams: { id: uuidParam },
    responses: { '200': { description: 'The endpoint, with its new secret.', schema: ref('WebhookEndpoint') } },
    handler: async ({ deps, auth, params, reply }) => reply(async (unit) => {
      const { row, secret } = await rotateSecret(unit, deps.config.encryptionKeys, auth, byId(params));
      return { status: 200, body: endpointView(row, secret), replayBody: endpointView(row) };
    }),
  },
  {
    method: 'post',
    path: '/webhook-endpoints/{id}/test',
    operationId: 'sendWebhookTestEvent',
    errors: ['invalid_state'],
    summary: 'Send this endpoint a signed test event.',
    description:
      'Answers 202 and delivers `{ id, type: "webhook.test", sequence, created_at, data: { webhook_endpoint_id } }` to this endpoint alone, signed and retried like any event; ' +
      'the attempt shows in its deliveries. Check an endpoint and its signature verification before real money moves. A disabled endpoint: 409 `invalid_state`.',
    tag: 'Webhooks',
    scope: 'webhooks:write',
    pathParams: { id: uuidParam },
    responses: { '202': { description: 'Queued.', schema: ref('WebhookTest') } },
    handler: async ({ auth, params, reply }) => {
      const endpointId = byId(params);
      return reply(async (unit) => {
        const endpoint = await findEndpoint(unit.em, auth, endpointId);
        if (endpoint.status === 'disabled') throw AppError.invalidState('This webhook endpoint is disabled: register it again to send it events.', { status: endpoint.status });
        return { status: 202, body: { event_id: await sendTestEvent(unit, auth, endpoint.id), webhook_endpoint_id: endpointId } };
      });
    },
  },
  {
    method: 'get',
    path: '/webhook-endpoints/{id}/deliveries',
    operationId: 'listWebhookDeliveries',
    summary: 'List an endpoint\'s delivery attempts, newest first.',
    tag: 'Webhooks',
    scope: 'webhooks:read',
    pathParams: { id: uuidParam },
    query: { ...paginationQuery },
    responses: { '200': { description: 'A page of attempts.', schema: ref('WebhookDeliveryList') } },
    handler: async ({ deps, auth, params, query }) => {
      const endpoint = await findEndpoint(deps.ds, auth, byId(params));
      const { where, params: values } = scopedWhere('d', auth, { endpoint_id: endpoint.id }, [['endpoint_id', 'd.endpoint_id = $']]);
      const page = await listPage<Record<string, any> & { id: string; cursor_ts: string }, unknown>(
        deps.ds,
        { columns: 'd.id, d.event_id, d.event_type, d.attempt, d.status_code, d.latency_ms, d.error, d.next_retry_at, d.created_at', from: 'webhook_deliveries d', alias: 'd', where, params: values },
        query as PageQuery,
        ({ cursor_ts: _cursor, ...row }) => ({ ...row, next_retry_at: row.next_retry_at?.toISOString() ?? null, created_at: row.created_at.toISOString() }),
      );
      return { status: 200, body: page };
    },
  },
];
