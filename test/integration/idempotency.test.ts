import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { getDs, testRedis } from '../helpers/shared.js';
import { startRedisProxy } from '../helpers/redis-proxy.js';
import { getConfig } from '../../shared/config.js';
import type { RouteDef } from '../../api/routes/route.js';
import { until } from '../helpers/until.js';

const CUSTOMERS = '/api/v1/business/customers';

// Test-only operations mounted behind the real pipeline: one that fails like a bug once, one that is slow.
let failuresLeft = 0;
let slowRelease: (() => void) | null = null;
const calls = { flaky: 0, slow: 0 };
const testRoutes: RouteDef[] = [
  {
    method: 'post', path: '/test-flaky', operationId: 'testFlaky', summary: 'test', tag: 'Test', scope: null,
    body: { schema: { type: 'object', additionalProperties: false, properties: { n: { type: 'integer' } } } },
    responses: { '201': { description: 'ok' } },
    handler: async () => {
      calls.flaky += 1;
      if (failuresLeft > 0) {
        failuresLeft -= 1;
        throw new Error('database went away');
      }
      return { status: 201, body: { call: calls.flaky } };
    },
  },
  {
    method: 'post', path: '/test-slow', operationId: 'testSlow', summary: 'test', tag: 'Test', scope: null,
    body: { schema: { type: 'object' }, required: false },
    responses: { '201': { description: 'ok' } },
    handler: async () => {
      calls.slow += 1;
      await new Promise<void>((r) => (slowRelease = r));
      return { status: 201, body: { call: calls.slow } };
    },
  },
];

describe('idempotency', () => {
  let api: ApiHarness;
  let key: string;
  let businessId: string;
  before(async () => {
    api = await startApi({ extraRoutes: testRoutes });
    const biz = await makeBusiness();
    key = biz.sandboxKey;
    businessId = biz.businessId;
  });
  after(() => api.close());

  async function customerCount(reference: string): Promise<number> {
    const rows = await (await getDs()).query(`SELECT count(*)::int AS n FROM customers WHERE business_id = $1 AND external_reference = $2`, [businessId, reference]);
    return rows[0].n;
  }

  it('replays the stored answer byte for byte with Idempotent-Replayed: true', async () => {
    const headers = writeHeaders(key);
    const body = { external_reference: `replay-${randomUUID()}`, display_name: 'Replay' };
    const first = await api.http.post(CUSTOMERS).set(headers).send(body);
    expect(first.status).to.equal(201);
    expect(first.headers['idempotent-replayed']).to.equal(undefined);
    // Same body with keys in another order is the same request.
    const second = await api.http.post(CUSTOMERS).set(headers).send({ display_name: 'Replay', external_reference: body.external_reference });
    expect(second.status).to.equal(201);
    expect(second.headers['idempotent-replayed']).to.equal('true');
    expect(second.text).to.equal(first.text);
    expect(await customerCount(body.external_reference)).to.equal(1);
  });

  it('replays 4xx answers too, with the request id their body quotes', async () => {
    const headers = writeHeaders(key);
    const first = await api.http.post(CUSTOMERS).set(headers).send({ external_reference: '' });
    expect(first.status).to.equal(400);
    const second = await api.http.post(CUSTOMERS).set(headers).send({ external_reference: '' });
    expect(second.headers['idempotent-replayed']).to.equal('true');
    expect(second.text).to.equal(first.text);
    expect(second.headers['x-request-id']).to.equal(first.headers['x-request-id']);
    expect(second.body.error.requestId).to.equal(second.headers['x-request-id']);
  });

  it('the same operation through a trailing slash is the same request', async () => {
    const headers = writeHeaders(key);
    const body = { external_reference: `slash-${randomUUID()}` };
    const first = await api.http.post(CUSTOMERS).set(headers).send(body);
    const second = await api.http.post(`${CUSTOMERS}/`).set(headers).send(body);
    expect(first.status).to.equal(201);
    expect(second.headers['idempotent-replayed']).to.equal('true');
    expect(second.text).to.equal(first.text);
  });

  it('422 idempotency_key_reused for another body, path or method under the same key', async () => {
    const headers = writeHeaders(key);
    const ref = `reuse-${randomUUID()}`;
    expect((await api.http.post(CUSTOMERS).set(headers).send({ external_reference: ref })).status).to.equal(201);
    const otherBody = await api.http.post(CUSTOMERS).set(headers).send({ external_reference: `${ref}-2` });
    expect(otherBody.status).to.equal(422);
    expect(otherBody.body.error.code).to.equal('idempotency_key_reused');
    const otherPath = await api.http.post('/api/v1/business/test-flaky').set(headers).send({ external_reference: ref });
    expect(otherPath.body.error.code).to.equal('idempotency_key_reused');
    expect(await customerCount(`${ref}-2`)).to.equal(0);
  });

  it('keys are scoped per business and environment', async () => {
    const other = await makeBusiness();
    const idem = randomUUID();
    const ref = `scoped-${randomUUID()}`;
    const a = await api.http.post(CUSTOMERS).set(writeHeaders(key, idem)).send({ external_reference: ref });
    const b = await api.http.post(CUSTOMERS).set(writeHeaders(other.sandboxKey, idem)).send({ external_reference: ref });
    const c = await api.http.post(CUSTOMERS).set(writeHeaders(other.liveKey, idem)).send({ external_reference: ref });
    expect([a.status, b.status, c.status]).to.deep.equal([201, 201, 201]);
    expect(new Set([a.body.id, b.body.id, c.body.id]).size).to.equal(3);
    expect(b.headers['idempotent-replayed']).to.equal(undefined);
  });

  it('409 idempotency_key_in_use with Retry-After while the first request is in flight', async () => {
    const headers = writeHeaders(key);
    const first = api.http.post('/api/v1/business/test-slow').set(headers).send({}).then((r) => r);
    await until(() => slowRelease, { timeoutMs: 5_000, everyMs: 10, what: 'the slow request starting' });
    const during = await api.http.post('/api/v1/business/test-slow').set(headers).send({});
    expect(during.status).to.equal(409);
    expect(during.body.error.code).to.equal('idempotency_key_in_use');
    expect(Number(during.headers['retry-after'])).to.be.at.least(1);
    slowRelease!();
    const done = await first;
    expect(done.status).to.equal(201);
    const after = await api.http.post('/api/v1/business/test-slow').set(headers).send({});
    expect(after.headers['idempotent-replayed']).to.equal('true');
    expect(after.text).to.equal(done.text);
    expect(calls.slow).to.equal(1);
  });

  it('a request slower than the in-flight lock keeps its lock: a late retry is 409, never a second run', async () => {
    // A lock of 600 ms renewed every 200 ms: a loaded machine's event loop may stall longer than a third of 200 ms.
    const shortLock = await startApi({ extraRoutes: testRoutes, env: { IDEMPOTENCY_LOCK_MS: '600' } });
    try {
      const headers = writeHeaders(key);
      slowRelease = null;
      const before = calls.slow;
      const first = shortLock.http.post('/api/v1/business/test-slow').set(headers).send({}).then((r) => r);
      await until(() => slowRelease, { timeoutMs: 5_000, everyMs: 10, what: 'the slow request starting' });
      await new Promise((r) => setTimeout(r, 2_000)); // more than three lock lifetimes
      const late = await shortLock.http.post('/api/v1/business/test-slow').set(headers).send({});
      expect(late.status).to.equal(409);
      expect(late.body.error.code).to.equal('idempotency_key_in_use');
      slowRelease!();
      const done = await first;
      expect(done.status).to.equal(201);
      const replay = await shortLock.http.post('/api/v1/business/test-slow').set(headers).send({});
      expect(replay.headers['idempotent-replayed']).to.equal('true');
      expect(calls.slow - before).to.equal(1);
    } finally {
      await shortLock.close();
    }
  });

  it('an answer Redis could not take when it was sent is recorded once Redis answers again: the retry replays it', async function () {
    this.timeout(20_000);
    const proxy = await startRedisProxy();
    // A lock shorter than the stall: without the late record, the retry would claim the key afresh and run again.
    const flaky = await startApi({ extraRoutes: testRoutes, env: { REDIS_URL: proxy.url, REDIS_COMMAND_TIMEOUT_MS: '200', IDEMPOTENCY_LOCK_MS: '300' } });
    try {
      const headers = writeHeaders(key);
      slowRelease = null;
      const before = calls.slow;
      const first = flaky.http.post('/api/v1/business/test-slow').set(headers).send({}).then((r) => r);
      await until(() => slowRelease, { timeoutMs: 5_000, everyMs: 10, what: 'the slow request starting' });
      // Redis goes away mid-request: the connection drops, and it stays away longer than the in-flight lock lives.
      proxy.cut();
      await new Promise((r) => setTimeout(r, 600));
      slowRelease!();
      const done = await first;
      expect(done.status).to.equal(201); // the write happened; the client has its answer
      proxy.resume();
      const stored = async () => {
        const keys = await testRedis().keys(`${getConfig().redisPrefix}:idem:${businessId}:sandbox:*`);
        const values = await Promise.all(keys.map((k) => testRedis().get(k)));
        return values.some((v) => v !== null && JSON.parse(v).s === 'd' && JSON.parse(v).b === done.text);
      };
      const recorded = await until(stored, { timeoutMs: 4_000, everyMs: 100, what: 'the answer reaching Redis once it answers again' });
      expect(recorded).to.equal(true);
      expect(flaky.deps.unsettled.size).to.equal(0);
      const retry = await flaky.http.post('/api/v1/business/test-slow').set(headers).send({});
      expect(retry.headers['idempotent-replayed']).to.equal('true');
      expect(retry.text).to.equal(done.text);
      expect(calls.slow - before).to.equal(1);
    } finally {
      proxy.resume();
      await flaky.close();
      await proxy.close();
    }
  });

  it('a 5xx is not stored: the key is released and the retry runs', async () => {
    const headers = writeHeaders(key);
    failuresLeft = 1;
    const before = calls.flaky;
    const failed = await api.http.post('/api/v1/business/test-flaky').set(headers).send({ n: 1 });
    expect(failed.status).to.equal(500);
    expect(failed.body.error.code).to.equal('internal_error');
    const retried = await api.http.post('/api/v1/business/test-flaky').set(headers).send({ n: 1 });
    expect(retried.status).to.equal(201);
    expect(retried.headers['idempotent-replayed']).to.equal(undefined);
    expect(calls.flaky - before).to.equal(2);
  });

  it('50 concurrent identical requests create exactly one customer; every success is byte-identical', async function () {
    this.timeout(30_000);
    const headers = writeHeaders(key);
    const body = { external_reference: `burst-${randomUUID()}`, metadata: { order: '42' } };
    const results = await Promise.all(Array.from({ length: 50 }, () => api.http.post(CUSTOMERS).set(headers).send(body)));
    const ok = results.filter((r) => r.status === 201);
    const busy = results.filter((r) => r.status === 409);
    expect(ok.length + busy.length).to.equal(50);
    expect(ok.length).to.be.at.least(1);
    expect(new Set(ok.map((r) => r.text)).size).to.equal(1);
    for (const r of busy) expect(r.body.error.code).to.equal('idempotency_key_in_use');
    // The clients that were told to retry get the same bytes.
    for (const r of busy.slice(0, 5)) {
      const again = await api.http.post(CUSTOMERS).set(headers).send(body);
      expect(again.text).to.equal(ok[0].text);
    }
    expect(await customerCount(body.external_reference)).to.equal(1);
  });

  it('GET requests need no key and are never replayed', async () => {
    const res = await api.http.get(CUSTOMERS).set(bearer(key)).set('Idempotency-Key', 'ignored-on-reads');
    expect(res.status).to.equal(200);
    expect(res.headers['idempotent-replayed']).to.equal(undefined);
  });
});
