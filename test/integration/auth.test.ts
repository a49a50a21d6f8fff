import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { enableLive, revokeKey } from '../../shared/admin/commands.js';
import type { RouteDef } from '../../api/routes/route.js';
import { getConfig } from '../../shared/config.js';
import { ApiKeyCache, watchKeyChanges } from '../../api/middleware/api-key-cache.js';
import { hashApiKey } from '../../shared/domain/api-keys.js';
import { createWorkerRedis } from '../../shared/queues/connections.js';
import { until } from '../helpers/until.js';

const ACCOUNT = '/api/v1/business/account';

/** Counts the API key reads the (real) database answers, until restored. */
function watchKeyReads(ds: DataSource): { count: number; restore: () => void } {
  const query = ds.query.bind(ds);
  const watch = {
    count: 0,
    restore: () => {
      ds.query = query;
    },
  };
  ds.query = ((sql: string, params?: unknown[]) => {
    if (sql.includes('FROM api_keys k JOIN businesses b')) watch.count += 1;
    return query(sql, params);
  }) as typeof ds.query;
  return watch;
}

function expectEnvelope(res: { status: number; body: any; headers: Record<string, string> }, status: number, code: string): void {
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
  expect(res.body.error.code).to.equal(code);
  expect(res.body.error.requestId).to.equal(res.headers['x-request-id']);
  expect(res.body.error.message).to.be.a('string').and.not.empty;
}

describe('authentication', () => {
  let api: ApiHarness;
  before(async () => {
    api = await startApi();
  });
  after(() => api.close());

  it('401 when the key is missing', async () => {
    expectEnvelope(await api.http.get(ACCOUNT), 401, 'unauthorized');
  });

  it('401 for malformed headers and keys', async () => {
    for (const header of ['Basic abc', 'Bearer', 'Bearer svc_test_short', 'Bearer sk_live_' + 'a'.repeat(43), 'Bearer  svc_test_' + 'a'.repeat(43)]) {
      expectEnvelope(await api.http.get(ACCOUNT).set('Authorization', header), 401, 'unauthorized');
    }
  });

  it('the Bearer scheme is case-insensitive (RFC 7235)', async () => {
    const biz = await makeBusiness();
    expect((await api.http.get(ACCOUNT).set('Authorization', `bearer ${biz.sandboxKey}`)).status).to.equal(200);
    expect((await api.http.get(ACCOUNT).set('Authorization', `BEARER ${biz.sandboxKey}`)).status).to.equal(200);
  });

  it('401 for a well-formed key we never issued', async () => {
    expectEnvelope(await api.http.get(ACCOUNT).set(bearer('svc_test_' + 'A'.repeat(43))), 401, 'unauthorized');
  });

  it('401 once a key is revoked, across processes through the key-change channel', async () => {
    const biz = await makeBusiness();
    const config = getConfig();
    const { stop, subscribed } = watchKeyChanges(config.redisUrl, config.redisPrefix, api.keyCache, createWorkerRedis);
    await subscribed;
    try {
      expect((await api.http.get(ACCOUNT).set(bearer(biz.sandboxKey))).status).to.equal(200); // now cached
      const redis = createWorkerRedis();
      await revokeKey({ ds: await getDs(), config, redis }, { keyId: biz.keys.find((k) => k.environment === 'sandbox')!.id });
      redis.disconnect();
      const status = await until(async () => {
        const s = (await api.http.get(ACCOUNT).set(bearer(biz.sandboxKey))).status;
        return s !== 200 && s;
      }, { timeoutMs: 1_000, what: 'the revoked key being refused' });
      expect(status).to.equal(401);
      // The live key of the same business still works.
      expect((await api.http.get(ACCOUNT).set(bearer(biz.liveKey))).status).to.equal(200);
    } finally {
      stop();
    }
  });

  it('a lookup already reading when a revocation clears the cache does not re-cache the old key', async () => {
    const biz = await makeBusiness();
    const ds = await getDs();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    // The real database; only its answer is held back, as a slow reply would be.
    let read = false;
    const slow = { query: async (sql: string, params: unknown[]) => { const rows = await ds.query(sql, params); read = true; await held; return rows; } };
    const cache = new ApiKeyCache(slow as unknown as typeof ds, 60_000);
    const hash = hashApiKey(biz.sandboxKey);
    const inFlight = cache.lookup(hash);
    await until(() => read, { what: 'the lookup\'s read done' }); // before the revocation, however slow the machine
    await revokeKey({ ds, config: getConfig() }, { keyId: biz.keys.find((k) => k.environment === 'sandbox')!.id });
    cache.clear(); // what the key-change channel does in every web process
    release();
    expect(await inFlight).to.not.equal(null); // it read before the revocation
    expect(await cache.lookup(hash)).to.equal(null);
  });

  it('the key decides the environment: the same business reads sandbox or live', async () => {
    const biz = await makeBusiness();
    const sandbox = await api.http.get(ACCOUNT).set(bearer(biz.sandboxKey));
    const live = await api.http.get(ACCOUNT).set(bearer(biz.liveKey));
    expect(sandbox.body.environment).to.equal('sandbox');
    expect(live.body.environment).to.equal('live');
    expect(sandbox.body.api_key.id).not.to.equal(live.body.api_key.id);
  });

  it('403 ip_not_allowed from an address outside the allowlist, before any endpoint work', async () => {
    const biz = await makeBusiness();
    const key = await makeKey(biz.businessId, { allowedIps: ['203.0.113.7', '2001:db8::1'] });
    expectEnvelope(await api.http.get(ACCOUNT).set(bearer(key.key)), 403, 'ip_not_allowed');
    // No idempotency record was made: the same key from the same place is refused the same way, not replayed or 409.
    const write = writeHeaders(key.key, 'ip-check-0001');
    const first = await api.http.post('/api/v1/business/nowhere').set(write).send({});
    const second = await api.http.post('/api/v1/business/nowhere').set(write).send({});
    expectEnvelope(first, 403, 'ip_not_allowed');
    expectEnvelope(second, 403, 'ip_not_allowed');
    expect(second.headers['idempotent-replayed']).to.equal(undefined);
    // The key's own limiter never ran: the rate headers are the address's failed-authentication window.
    expect(first.headers['x-ratelimit-limit']).to.equal(String(api.deps.config.authFailLimit));
    expect(Number(first.headers['x-ratelimit-remaining'])).to.be.within(0, api.deps.config.authFailLimit - 1);
  });

  it('an allowed loopback address passes (IPv4 and its IPv6-mapped form are one address)', async () => {
    const biz = await makeBusiness();
    const key = await makeKey(biz.businessId, { allowedIps: ['127.0.0.1'] });
    expect((await api.http.get(ACCOUNT).set(bearer(key.key))).status).to.equal(200);
  });

  describe('X-Forwarded-For', () => {
    it('is ignored unless TRUST_PROXY is set', async () => {
      const biz = await makeBusiness();
      const key = await makeKey(biz.businessId, { allowedIps: ['198.51.100.9'] });
      const res = await api.http.get(ACCOUNT).set(bearer(key.key)).set('X-Forwarded-For', '198.51.100.9');
      expectEnvelope(res, 403, 'ip_not_allowed');
    });

    it('is honoured when TRUST_PROXY is set', async () => {
      const trusted = await startApi({ env: { TRUST_PROXY: '1' } });
      try {
        const biz = await makeBusiness();
        const key = await makeKey(biz.businessId, { allowedIps: ['198.51.100.9'] });
        expect((await trusted.http.get(ACCOUNT).set(bearer(key.key)).set('X-Forwarded-For', '198.51.100.9')).status).to.equal(200);
        expectEnvelope(await trusted.http.get(ACCOUNT).set(bearer(key.key)).set('X-Forwarded-For', '198.51.100.10'), 403, 'ip_not_allowed');
        // Only the hop the proxy added counts: a client cannot spoof by prepending.
        expectEnvelope(await trusted.http.get(ACCOUNT).set(bearer(key.key)).set('X-Forwarded-For', '198.51.100.9, 192.0.2.1'), 403, 'ip_not_allowed');
      } finally {
        await trusted.close();
      }
    });
  });

  it('429 after repeated failed authentication from one address', async () => {
    const limited = await startApi({ env: { AUTH_FAIL_LIMIT: '3', AUTH_FAIL_WINDOW_SECONDS: '30', TRUST_PROXY: '1' } });
    try {
      const from = '192.0.2.55';
      const biz = await makeBusiness();
      // Seen valid before the address is blocked: this process holds it.
      expect((await limited.http.get(ACCOUNT).set(bearer(biz.sandboxKey)).set('X-Forwarded-For', from)).status).to.equal(200);
      const bad = () => limited.http.get(ACCOUNT).set(bearer('svc_test_' + 'B'.repeat(43))).set('X-Forwarded-For', from);
      for (let i = 0; i < 3; i++) expectEnvelope(await bad(), 401, 'unauthorized');
      const blocked = await bad();
      expectEnvelope(blocked, 429, 'rate_limited');
      expect(Number(blocked.headers['retry-after'])).to.be.within(1, 30);
      // Another address is unaffected, and so is a valid key this process already holds, from the same address.
      expectEnvelope(await limited.http.get(ACCOUNT).set(bearer('svc_test_' + 'B'.repeat(43))).set('X-Forwarded-For', '192.0.2.56'), 401, 'unauthorized');
      expect((await limited.http.get(ACCOUNT).set(bearer(biz.sandboxKey)).set('X-Forwarded-For', from)).status).to.equal(200);
      // A leaked key used from outside its allowlist counts the same way: it cannot be hammered either.
      const pinned = await makeKey(biz.businessId, { allowedIps: ['203.0.113.7'] });
      const elsewhere = () => limited.http.get(ACCOUNT).set(bearer(pinned.key)).set('X-Forwarded-For', '192.0.2.57');
      for (let i = 0; i < 3; i++) expectEnvelope(await elsewhere(), 403, 'ip_not_allowed');
      expectEnvelope(await elsewhere(), 429, 'rate_limited');
    } finally {
      await limited.close();
    }
  });

  it('an IPv6 client is counted by its /64: rotating addresses inside it does not reset the count', async () => {
    const limited = await startApi({ env: { AUTH_FAIL_LIMIT: '3', AUTH_FAIL_WINDOW_SECONDS: '30', TRUST_PROXY: '1' } });
    try {
      const bad = (from: string) => limited.http.get(ACCOUNT).set(bearer('svc_test_' + 'C'.repeat(43))).set('X-Forwarded-For', from);
      // Four addresses of one /64, each written differently (compressed, full, upper case).
      for (const from of ['2001:db8:5:6::1', '2001:0db8:0005:0006:ffff:1:2:3', '2001:DB8:5:6:A::B']) expectEnvelope(await bad(from), 401, 'unauthorized');
      expectEnvelope(await bad('2001:db8:5:6:dead:beef:0:9'), 429, 'rate_limited');
      // The next /64 is another client.
      expectEnvelope(await bad('2001:db8:5:7::1'), 401, 'unauthorized');
    } finally {
      await limited.close();
    }
  });

  it('an address over AUTH_FAIL_LIMIT is refused before PostgreSQL reads a key this process does not hold', async () => {
    const limited = await startApi({ env: { AUTH_FAIL_LIMIT: '3', AUTH_FAIL_WINDOW_SECONDS: '30', TRUST_PROXY: '1', API_KEY_CACHE_TTL_MS: '1500' } });
    const reads = watchKeyReads(limited.deps.ds);
    const scripts = limited.deps.scripts;
    const countFailures = scripts.authFailCount;
    let failureReads = 0;
    scripts.authFailCount = (key) => ((failureReads += 1), countFailures(key));
    try {
      const from = '192.0.2.65';
      const random = () => limited.http.get(ACCOUNT).set(bearer(`svc_test_${randomBytes(32).toString('base64url')}`)).set('X-Forwarded-For', from);
      const known = await makeBusiness();
      const unseen = await makeBusiness();
      expect((await limited.http.get(ACCOUNT).set(bearer(known.sandboxKey)).set('X-Forwarded-For', from)).status).to.equal(200);
      // A key this process holds costs no Redis round trip before the rate limit.
      failureReads = 0;
      expect((await limited.http.get(ACCOUNT).set(bearer(known.sandboxKey)).set('X-Forwarded-For', from)).status).to.equal(200);
      expect(failureReads, 'failure-count reads for a cached valid key').to.equal(0);
      reads.count = 0;

      for (let i = 0; i < 3; i++) expectEnvelope(await random(), 401, 'unauthorized');
      expect(reads.count, 'one key read per guess while the address has failures left').to.equal(3);
      reads.count = 0;
      for (let i = 0; i < 5; i++) {
        const res = await random();
        expectEnvelope(res, 429, 'rate_limited');
        expect(Number(res.headers['retry-after'])).to.be.within(1, 30);
        expect(res.headers['x-ratelimit-remaining']).to.equal('0');
      }
      // An issued key this process never read cannot be told from a guess without PostgreSQL: refused the same way.
      expectEnvelope(await limited.http.get(ACCOUNT).set(bearer(unseen.sandboxKey)).set('X-Forwarded-For', from), 429, 'rate_limited');
      expect(reads.count, 'key reads once the address is over its limit').to.equal(0);
      // A key seen valid is read again once its entry has expired, so guessing does not lock out a shared address.
      await new Promise((r) => setTimeout(r, 1_600));
      expect((await limited.http.get(ACCOUNT).set(bearer(known.sandboxKey)).set('X-Forwarded-For', from)).status).to.equal(200);
      expect(reads.count).to.equal(1);
      // Other addresses still reach PostgreSQL.
      expect((await limited.http.get(ACCOUNT).set(bearer(unseen.sandboxKey)).set('X-Forwarded-For', '192.0.2.66')).status).to.equal(200);
    } finally {
      scripts.authFailCount = countFailures;
      reads.restore();
      await limited.close();
    }
  });

  it('the key cache evicts the least recently used key, and a flood of unknown keys evicts no valid one', async () => {
    const ds = await getDs();
    const reads = watchKeyReads(ds);
    try {
      const cache = new ApiKeyCache(ds, 60_000, 3);
      const keys = await Promise.all([1, 2, 3, 4].map(async () => hashApiKey((await makeBusiness()).sandboxKey)));
      const [a, b, c, d] = keys;
      for (const hash of [a, b, c]) expect(await cache.lookup(hash)).to.not.equal(null);
      expect(reads.count).to.equal(3);
      await cache.lookup(a); // used: b is now the least recently used
      expect(await cache.lookup(d)).to.not.equal(null);
      expect(reads.count).to.equal(4);
      for (const hash of [a, c, d]) await cache.lookup(hash);
      expect(reads.count, 'a, c and d are still held').to.equal(4);
      for (let i = 0; i < 50; i++) expect(await cache.lookup(hashApiKey(`svc_test_${randomBytes(32).toString('base64url')}`))).to.equal(null);
      reads.count = 0;
      for (const hash of [a, c, d]) expect(await cache.lookup(hash)).to.not.equal(null);
      expect(reads.count, 'valid keys read again after the flood').to.equal(0);
      expect(await cache.lookup(b)).to.not.equal(null);
      expect(reads.count, 'only the evicted key is read again').to.equal(1);
    } finally {
      reads.restore();
    }
  });
});

describe('authorization across businesses, environments and scopes', () => {
  let api: ApiHarness;
  before(async () => {
    api = await startApi();
  });
  after(() => api.close());

  it('a resource of another business, or of the other environment, is 404 and never its data', async () => {
    const owner = await makeBusiness();
    const stranger = await makeBusiness();
    const created = await api.http.post('/api/v1/business/customers').set(writeHeaders(owner.sandboxKey)).send({ external_reference: 'isolated-1' });
    expect(created.status).to.equal(201);
    const path = `/api/v1/business/customers/${created.body.id}`;
    expect((await api.http.get(path).set(bearer(owner.sandboxKey))).status).to.equal(200);
    for (const key of [stranger.sandboxKey, owner.liveKey, stranger.liveKey]) {
      const res = await api.http.get(path).set(bearer(key));
      expectEnvelope(res, 404, 'not_found');
      expect(res.text).not.to.include('isolated-1');
    }
    const list = await api.http.get('/api/v1/business/customers').set(bearer(owner.liveKey));
    expect(list.body.data.map((c: { id: string }) => c.id)).not.to.include(created.body.id);
  });

  it('403 insufficient_scope names the scope the operation needs', async () => {
    const biz = await makeBusiness();
    const readOnly = await makeKey(biz.businessId, { scopes: ['customers:read'] });
    expect((await api.http.get('/api/v1/business/customers').set(bearer(readOnly.key))).status).to.equal(200);
    const res = await api.http.post('/api/v1/business/customers').set(writeHeaders(readOnly.key)).send({ external_reference: 'nope' });
    expectEnvelope(res, 403, 'insufficient_scope');
    expect(res.body.error.details).to.deep.equal({ required_scope: 'customers:write' });
    // Any valid key reads its own account, whatever its scopes.
    expect((await api.http.get(ACCOUNT).set(bearer(readOnly.key))).status).to.equal(200);
  });
});

describe('live money movement needs the business enabled for live', () => {
  const moving: RouteDef = {
    method: 'post', path: '/test-move-money', operationId: 'testMoveMoney', summary: 'test', tag: 'Test',
    scope: null, requiresLiveEnabled: true, body: { schema: { type: 'object' }, required: false },
    responses: { '201': { description: 'ok' } },
    handler: async () => ({ status: 201, body: { moved: true } }),
  };
  let api: ApiHarness;
  before(async () => {
    api = await startApi({ extraRoutes: [moving] });
  });
  after(() => api.close());

  it('403 live_not_enabled for a live key until enable-live; sandbox is never gated', async () => {
    const biz = await makeBusiness();
    const denied = await api.http.post('/api/v1/business/test-move-money').set(writeHeaders(biz.liveKey)).send({});
    expectEnvelope(denied, 403, 'live_not_enabled');
    expect((await api.http.post('/api/v1/business/test-move-money').set(writeHeaders(biz.sandboxKey)).send({})).status).to.equal(201);
    await enableLive({ ds: await getDs(), config: getConfig() }, { businessId: biz.businessId });
    api.keyCache.clear(); // as the key-change channel would
    expect((await api.http.post('/api/v1/business/test-move-money').set(writeHeaders(biz.liveKey)).send({})).status).to.equal(201);
  });
});
