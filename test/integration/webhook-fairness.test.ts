// CONTRACT 18 (fairness): one business's webhook deliveries use at most WEBHOOK_BUSINESS_CONCURRENCY of the webhooks
// pool at a time, so one business's slow endpoints never delay another business's deliveries.
import { expect } from 'chai';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { makeBusiness, writeHeaders } from '../helpers/factories.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { until } from '../helpers/until.js';
import { BASE } from '../helpers/wallets.js';
import { inUnit } from '../../shared/db/unit-of-work.js';

// A webhooks worker runs 50 deliveries at once; each endpoint may hold 16. Without a business share, 4 slow endpoints
// of one business (64 > 50) would fill the pool for a whole timeout.
const ENV = {
  WEBHOOKS_ALLOW_LOOPBACK: 'true', WEBHOOK_RETRY_SCHEDULE_MS: '60000', WEBHOOK_TIMEOUT_MS: '15000', WEBHOOK_ENDPOINT_CONCURRENCY: '16', WEBHOOK_BUSINESS_CONCURRENCY: '8',
};

/** An endpoint that answers 204 at once, or holds every request open ('hang') until closed. */
async function endpoint(hang: boolean): Promise<{ url: string; received: number; inFlight: number; close(): Promise<void> }> {
  const open: ServerResponse[] = [];
  const state = { url: '', received: 0, inFlight: 0, close: async () => undefined as void };
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      state.received += 1;
      if (!hang) return void res.writeHead(204).end();
      state.inFlight += 1;
      open.push(res);
      res.on('close', () => (state.inFlight -= 1));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  state.close = () => {
    for (const res of open) res.destroy();
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return state;
}

describe('webhooks: one business\'s share of the pool (WEBHOOK_BUSINESS_CONCURRENCY)', function () {
  this.timeout(60_000);
  let api: ApiHarness;
  let pools: RunningPools;
  const servers: { close(): Promise<void> }[] = [];

  before(async () => {
    api = await startApi({ env: ENV });
    pools = await startPools(['webhooks'], { env: ENV });
  });
  after(async () => {
    await pools?.close();
    await Promise.all(servers.map((s) => s.close()));
    await api?.close();
  });

  const register = async (key: string, url: string) => {
    const res = await api.http.post(`${BASE}/webhook-endpoints`).set(writeHeaders(key)).send({ url });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  };
  const emit = (businessId: string, n: number) => inUnit(api.deps, async (unit) => {
    for (let i = 0; i < n; i++) await unit.event({ businessId, environment: 'sandbox' }, 'quote.available', { id: randomUUID() });
  });

  it('a second business\'s deliveries flow while the first business\'s slow endpoints hold their share', async () => {
    const [busy, calm] = [await makeBusiness(), await makeBusiness()];
    const slow = await Promise.all([0, 1, 2, 3].map(() => endpoint(true)));
    const healthy = await endpoint(false);
    servers.push(...slow, healthy);
    for (const s of slow) await register(busy.sandboxKey, s.url);
    await register(calm.sandboxKey, healthy.url);
    // 120 deliveries of the busy business first, every one held open for the whole timeout (15 s) ...
    await emit(busy.businessId, 30);
    await until(async () => slow.reduce((n, s) => n + s.received, 0) >= 8, { timeoutMs: 20_000, what: 'the busy business filling its share', describe: () => slow.map((s) => s.received) });
    // ... then the calm business's: they arrive while the busy ones still hang.
    const started = Date.now();
    await emit(calm.businessId, 5);
    await until(async () => healthy.received >= 5, { timeoutMs: 10_000, what: 'the calm business\'s deliveries' });
    const waited = Date.now() - started;
    const busyInFlight = slow.reduce((n, s) => n + s.inFlight, 0);
    expect(waited, 'the calm business waited for the busy one\'s timeouts').to.be.below(8000);
    // The busy business never held more than its share.
    expect(busyInFlight).to.be.at.most(8);
    expect(slow.reduce((n, s) => n + s.received, 0)).to.be.at.most(8);
  });
});
