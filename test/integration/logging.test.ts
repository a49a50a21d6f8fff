import { expect } from 'chai';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { captureLogs } from '../helpers/log-capture.js';

describe('request logs', () => {
  const capture = captureLogs();
  let api: ApiHarness;
  before(async () => {
    api = await startApi({ log: capture.log });
  });
  after(() => api.close());

  it('one JSON line per request with request id, method, path, status and latency', async () => {
    const biz = await makeBusiness();
    const res = await api.http.get('/api/v1/business/account').set(bearer(biz.sandboxKey));
    await new Promise((r) => setTimeout(r, 20));
    const line = capture.lines().map((l) => JSON.parse(l)).find((l) => l.requestId === res.headers['x-request-id']);
    expect(line, 'a log line carrying the response X-Request-Id').to.be.an('object');
    expect(line).to.include({ method: 'GET', path: '/api/v1/business/account', status: 200, businessId: biz.businessId, environment: 'sandbox' });
    expect(line.latencyMs).to.be.a('number');
  });

  it('never writes an API key, an Authorization header or an Idempotency-Key value', async () => {
    const biz = await makeBusiness();
    await api.http.get('/api/v1/business/account').set(bearer(biz.sandboxKey));
    await api.http.get('/api/v1/business/account').set(bearer(biz.sandboxKey.slice(0, -2) + 'zz'));
    await api.http.post('/api/v1/business/anything').set(writeHeaders(biz.liveKey, 'idem-key-visible-0001')).send({ secret: 'x' });
    await new Promise((r) => setTimeout(r, 20));
    const text = capture.text();
    expect(text.length).to.be.greaterThan(0);
    for (const secret of [biz.sandboxKey, biz.liveKey, biz.sandboxKey.slice(9), 'Bearer ', 'idem-key-visible-0001']) {
      expect(text).not.to.include(secret);
    }
  });

  it('redacts secrets even when code logs them by mistake', () => {
    const probe = captureLogs();
    probe.log.info({ apiKey: 'svc_test_leak1', key: 'k-leak2', privateKey: '0xleak3', seed: 'leak4 words', details: { account_number: 'leak5' }, nested: { secret: 'leak6' } }, 'oops');
    const text = probe.text();
    for (const leak of ['leak1', 'leak2', 'leak3', 'leak4', 'leak5', 'leak6']) expect(text).not.to.include(leak);
    expect(text).to.include('[redacted]');
  });
});
