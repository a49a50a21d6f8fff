// Webhook test event: before real money moves, check that an endpoint is reachable and that its signature check
// passes. A receiver (examples/webhook-receiver.ts) listens, an endpoint is registered for its URL, and
// POST /webhook-endpoints/{id}/test sends that endpoint alone a signed `webhook.test` event; the attempt then shows in
// the endpoint's deliveries. The receiver must be reachable by the service: a loopback URL needs
// WEBHOOKS_ALLOW_LOOPBACK=true on a local service; otherwise give PUBLIC_URL (a tunnel to PORT).
//   RAMPWAY_KEY=svc_test_... [RAMPWAY_BASE_URL=http://localhost:3000] [PORT=4000] [PUBLIC_URL=https://...] npx tsx examples/webhook-test-event.ts
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { createRampwayClient, idempotencyKey, unwrap, type Schemas } from '@rampway/client';
import { startReceiver, type RampwayEvent } from './webhook-receiver.js';

export interface WebhookTestOptions {
  baseUrl: string;
  apiKey: string;
  /** Where the receiver listens (0: any free port). */
  port?: number;
  /** The URL the service posts to, when it is not http://127.0.0.1:<port>/rampway. */
  publicUrl?: string;
  timeoutMs?: number;
  log?: (line: string) => void;
}

export interface WebhookTestResult {
  endpoint: Schemas['WebhookEndpoint'];
  event: RampwayEvent;
  deliveries: Schemas['WebhookDelivery'][];
}

const closed = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

export async function webhookTestEvent(options: WebhookTestOptions): Promise<WebhookTestResult> {
  const api = createRampwayClient(options);
  const log = options.log ?? console.log;
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);

  // The endpoint's URL names the port, and the receiver needs the endpoint's secret: so the port first.
  let port = options.port ?? 4000;
  if (port === 0) {
    const probe = createServer().listen(0, '127.0.0.1');
    await new Promise((resolve) => probe.once('listening', resolve));
    port = (probe.address() as AddressInfo).port;
    await closed(probe);
  }
  const endpoint = unwrap(await api.POST('/api/v1/business/webhook-endpoints', {
    params: { header: { 'Idempotency-Key': idempotencyKey('endpoint') } },
    body: { url: options.publicUrl ?? `http://127.0.0.1:${port}/rampway`, events: ['transaction.*'] },
  }));
  log(`endpoint ${endpoint.id} -> ${endpoint.url}`);

  let received: RampwayEvent | undefined;
  const receiver = await startReceiver({ secret: endpoint.secret!, port, onEvent: (event) => { if (event.type === 'webhook.test') received = event; } });
  try {
    const sent = unwrap(await api.POST('/api/v1/business/webhook-endpoints/{id}/test', {
      params: { path: { id: endpoint.id }, header: { 'Idempotency-Key': idempotencyKey('test') } },
    }));
    log(`test event ${sent.event_id} sent`);
    while (!received) {
      if (Date.now() > deadline) throw new Error(`no verified webhook.test delivery within ${options.timeoutMs ?? 30_000} ms: is ${endpoint.url} reachable from the service?`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    log(`received ${received.type} ${received.id}, signature verified, for endpoint ${String(received.data.webhook_endpoint_id)}`);

    // The attempt, as the service recorded it (the answer's status code and latency).
    let deliveries: Schemas['WebhookDelivery'][] = [];
    while (!deliveries.some((d) => d.event_id === received!.id && d.status_code !== null)) {
      if (Date.now() > deadline) throw new Error(`the delivery of ${received.id} did not show in the endpoint's deliveries`);
      deliveries = unwrap(await api.GET('/api/v1/business/webhook-endpoints/{id}/deliveries', { params: { path: { id: endpoint.id } } })).data;
      if (!deliveries.some((d) => d.event_id === received!.id)) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    for (const d of deliveries) log(`delivery ${d.event_type} attempt ${d.attempt}: ${d.status_code} in ${d.latency_ms} ms`);
    return { endpoint, event: received, deliveries };
  } finally {
    await closed(receiver);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const apiKey = process.env.RAMPWAY_KEY;
  if (!apiKey) {
    console.error('Set RAMPWAY_KEY to a key holding webhooks:write and webhooks:read (npm run -s admin -- create-business --name Acme --json).');
    process.exit(2);
  }
  await webhookTestEvent({ baseUrl: process.env.RAMPWAY_BASE_URL ?? 'http://localhost:3000', apiKey, port: Number(process.env.PORT ?? 4000), publicUrl: process.env.PUBLIC_URL });
}
