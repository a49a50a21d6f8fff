import { expect } from 'chai';
import { startRedisProxy, type RedisProxy } from '../helpers/redis-proxy.js';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey, writeHeaders } from '../helpers/factories.js';
import { testRedis } from '../helpers/shared.js';
import { getConfig } from '../../shared/config.js';

const ACCOUNT = '/api/v1/business/account';

describe('rate limiting', () => {
  let api: ApiHarness;
  before(async () => {
    api = await startApi();
  });
  after(() => api.close());

  it('counts down X-RateLimit-Remaining and refuses with 429 + Retry-After past the limit', async () => {
    const biz = await makeBusiness();
    const key = await makeKey(biz.businessId, { rateLimit: 5, rateWindowSeconds: 30 });
    const remaining: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await api.http.get(ACCOUNT).set(bearer(key.key));
      expect(res.status).to.equal(200);
      expect(res.headers['x-ratelimit-limit']).to.equal('5');
      expect(Number(res.headers['x-ratelimit-reset'])).to.be.within(1, 30);
      remaining.push(res.headers['x-ratelimit-remaining']);
    }
    expect(remaining).to.deep.equal(['4', '3', '2', '1', '0']);
    const limited = await api.http.get(ACCOUNT).set(bearer(key.key));
    expect(limited.status).to.equal(429);
    expect(limited.body.error.code).to.equal('rate_limited');
    expect(Number(limited.headers['retry-after'])).to.be.within(1, 30);
    expect(limited.headers['x-ratelimit-remaining']).to.equal('0');
  });

  it('leases reads: a limit of 1000 counts ten reads in Redis at once, the headers count down one per request, and a write uses a leased one', async () => {
    const biz = await makeBusiness();
    const { key, id } = await makeKey(biz.businessId, { rateLimit: 1000, rateWindowSeconds: 60 });
    const counter = async () => Number(await testRedis().get(`${getConfig().redisPrefix}:rl:${id}`));
    const remaining: string[] = [];
    for (let i = 0; i < 3; i++) remaining.push((await api.http.get(ACCOUNT).set(bearer(key))).headers['x-ratelimit-remaining']);
    expect(remaining).to.deep.equal(['999', '998', '997']);
    // One round trip counted ten (the lease); the two reads after it asked Redis nothing.
    expect(await counter()).to.equal(10);
    const write = await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).send({ external_reference: `lease-${id}` });
    expect(write.status).to.equal(201);
    expect(write.headers['x-ratelimit-remaining']).to.equal('996');
    expect(await counter()).to.equal(10);
    // Past the lease, the next read leases ten more.
    for (let i = 0; i < 7; i++) await api.http.get(ACCOUNT).set(bearer(key));
    expect(await counter()).to.equal(20);
    expect((await api.http.get(ACCOUNT).set(bearer(key))).headers['x-ratelimit-remaining']).to.equal('988');
  });

  it('is per key: another key of the same business is not limited', async () => {
    const biz = await makeBusiness();
    const a = await makeKey(biz.businessId, { rateLimit: 1, rateWindowSeconds: 30 });
    const b = await makeKey(biz.businessId, { rateLimit: 1, rateWindowSeconds: 30 });
    expect((await api.http.get(ACCOUNT).set(bearer(a.key))).status).to.equal(200);
    expect((await api.http.get(ACCOUNT).set(bearer(a.key))).status).to.equal(429);
    expect((await api.http.get(ACCOUNT).set(bearer(b.key))).status).to.equal(200);
  });

  it('resets when the window ends', async () => {
    const biz = await makeBusiness();
    const key = await makeKey(biz.businessId, { rateLimit: 2, rateWindowSeconds: 1 });
    await api.http.get(ACCOUNT).set(bearer(key.key));
    await api.http.get(ACCOUNT).set(bearer(key.key));
    expect((await api.http.get(ACCOUNT).set(bearer(key.key))).status).to.equal(429);
    await new Promise((r) => setTimeout(r, 1100));
    const res = await api.http.get(ACCOUNT).set(bearer(key.key));
    expect(res.status).to.equal(200);
    expect(res.headers['x-ratelimit-remaining']).to.equal('1');
  });

  it('is atomic under concurrency: exactly `limit` requests pass', async () => {
    const biz = await makeBusiness();
    const key = await makeKey(biz.businessId, { rateLimit: 20, rateWindowSeconds: 30 });
    const results = await Promise.all(Array.from({ length: 40 }, () => api.http.get(ACCOUNT).set(bearer(key.key))));
    expect(results.filter((r) => r.status === 200)).to.have.length(20);
    expect(results.filter((r) => r.status === 429)).to.have.length(20);
  });

  it('carries the headers on authenticated error responses too', async () => {
    const biz = await makeBusiness();
    const res = await api.http.get('/api/v1/business/no-such-thing').set(bearer(biz.sandboxKey));
    expect(res.status).to.equal(404);
    expect(res.headers['x-ratelimit-limit']).to.equal('1000');
    // An unknown route is a 404 whatever its method: no Idempotency-Key is asked for.
    const unknownWrite = await api.http.post('/api/v1/business/no-such-thing').set(bearer(biz.sandboxKey)).send({});
    expect(unknownWrite.body.error.code).to.equal('not_found');
    expect(unknownWrite.headers['x-ratelimit-remaining']).to.equal('998');
    const missingKey = await api.http.post('/api/v1/business/customers').set(bearer(biz.sandboxKey)).send({});
    expect(missingKey.body.error.code).to.equal('idempotency_key_required');
    expect(missingKey.headers['x-ratelimit-remaining']).to.equal('997');
    const options = await api.http.options('/api/v1/business/customers').set(bearer(biz.sandboxKey));
    expect(options.status).to.equal(404);
    expect(options.body.error.code).to.equal('not_found');
    expect(options.headers['x-ratelimit-remaining']).to.equal('996');
  });

  describe('when Redis stalls (connected, but not answering)', () => {
    let proxy: RedisProxy;
    let stalled: ApiHarness;
    before(async () => {
      proxy = await startRedisProxy();
      stalled = await startApi({ env: { REDIS_URL: proxy.url, REDIS_COMMAND_TIMEOUT_MS: '200' } });
    });
    after(async () => {
      proxy.resume();
      await stalled.close();
      await proxy.close();
    });

    it('reads go on unlimited, writes get 503 with Retry-After, /ready says so: nothing hangs', async () => {
      const biz = await makeBusiness();
      // A limit under 100: every read asks Redis (no lease of several), so the read below meets the stall.
      const { key } = await makeKey(biz.businessId, { rateLimit: 50, rateWindowSeconds: 60 });
      expect((await stalled.http.get(ACCOUNT).set(bearer(key))).headers['x-ratelimit-limit']).to.equal('50');
      proxy.stall();
      try {
        const started = Date.now();
        const read = await stalled.http.get(ACCOUNT).set(bearer(key));
        expect(read.status).to.equal(200);
        expect(read.headers['x-ratelimit-limit']).to.equal(undefined);
        const write = await stalled.http.post('/api/v1/business/customers').set(writeHeaders(key)).send({ external_reference: 'stalled' });
        expect(write.status).to.equal(503);
        expect(Number(write.headers['retry-after'])).to.be.at.least(1);
        const ready = await stalled.http.get('/ready');
        expect(ready.status).to.equal(503);
        expect(ready.body.checks).to.deep.equal({ postgres: 'ok', redis: 'unreachable' });
        expect(Date.now() - started).to.be.below(5000);
      } finally {
        proxy.resume();
      }
    });
  });

  describe('when Redis is unreachable', () => {
    let down: ApiHarness;
    before(async () => {
      down = await startApi({ env: { REDIS_URL: 'redis://127.0.0.1:1' } });
    });
    after(() => down.close());

    it('lets reads through without limiting', async () => {
      const biz = await makeBusiness();
      const res = await down.http.get(ACCOUNT).set(bearer(biz.sandboxKey));
      expect(res.status).to.equal(200);
      expect(res.body.id).to.equal(biz.businessId);
    });

    it('still refuses a missing scope, a missing Idempotency-Key and unknown routes as usual', async () => {
      const biz = await makeBusiness();
      const readOnly = await makeKey(biz.businessId, { scopes: ['wallets:read'] });
      const scoped = await down.http.get('/api/v1/business/customers').set(bearer(readOnly.key));
      expect(scoped.status, scoped.text).to.equal(403);
      expect(scoped.body.error.code).to.equal('insufficient_scope');
      const noKey = await down.http.post('/api/v1/business/customers').set(bearer(biz.sandboxKey)).send({ external_reference: 'x' });
      expect(noKey.status).to.equal(400);
      expect(noKey.body.error.code).to.equal('idempotency_key_required');
      const unknown = await down.http.post('/api/v1/business/nothing-here').set(writeHeaders(biz.sandboxKey)).send({});
      expect(unknown.status).to.equal(404);
    });

    it('refuses writes with 503 and Retry-After, since idempotency cannot be guaranteed', async () => {
      const biz = await makeBusiness();
      const res = await down.http.post('/api/v1/business/customers').set(writeHeaders(biz.sandboxKey)).send({ external_reference: 'x' });
      expect(res.status).to.equal(503);
      expect(res.body.error.code).to.equal('service_unavailable');
      expect(Number(res.headers['retry-after'])).to.be.at.least(1);
    });
  });
});
