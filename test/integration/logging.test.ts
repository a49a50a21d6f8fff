import { expect } from 'chai';
import net, { type AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { captureLogs } from '../helpers/log-capture.js';
import type { RouteDef } from '../../api/routes/route.js';
import { httpServer } from '../../api/http-server.js';
import { until } from '../helpers/until.js';

let releaseSlow: (() => void) | null = null;
const slowRoute: RouteDef = {
  method: 'get', path: '/test-slow-read', operationId: 'testSlowRead', summary: 'test', tag: 'Test', scope: null,
  responses: { '200': { description: 'ok' } },
  handler: async () => {
    await new Promise<void>((r) => (releaseSlow = r));
    return { status: 200, body: { ok: true } };
  },
};

describe('request logs', () => {
  const capture = captureLogs();
  let api: ApiHarness;
  let server: Server;
  let port: number;
  before(async () => {
    api = await startApi({ log: capture.log, extraRoutes: [slowRoute] });
    server = httpServer(api.app, capture.log).listen(0);
    await new Promise((r) => server.once('listening', r));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.close();
    await api.close();
  });

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

  it('a request the client abandons still gets its line, marked aborted', async () => {
    const biz = await makeBusiness();
    const controller = new AbortController();
    const pending = fetch(`http://127.0.0.1:${port}/api/v1/business/test-slow-read`, { headers: bearer(biz.sandboxKey), signal: controller.signal }).catch(() => null);
    await until(() => releaseSlow, { timeoutMs: 1_000, everyMs: 10, what: 'the slow read starting' });
    controller.abort(); // a client timeout, or Heroku's router giving up at 30 s
    await pending;
    await new Promise((r) => setTimeout(r, 50));
    releaseSlow!();
    const line = capture.lines().map((l) => JSON.parse(l)).find((l) => l.path === '/api/v1/business/test-slow-read');
    expect(line, capture.text()).to.deep.include({ aborted: true, method: 'GET', businessId: biz.businessId });
    expect(line.requestId).to.match(/^[0-9a-f-]{36}$/);
  });

  it('what Node refuses before Express (headers over 16 KB, broken HTTP) still answers the envelope with X-Request-Id', async () => {
    const raw = (request: string) => new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write(request));
      let text = '';
      socket.on('data', (d) => (text += d));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    for (const request of [`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 'NOT HTTP AT ALL\r\n\r\n']) {
      const text = await raw(request);
      const [head, body] = text.split('\r\n\r\n');
      expect(head).to.match(/^HTTP\/1\.1 400 /);
      const id = /X-Request-Id: ([0-9a-f-]{36})/i.exec(head)?.[1];
      expect(id, head).to.be.a('string');
      expect(JSON.parse(body).error).to.deep.include({ code: 'invalid_request', requestId: id });
    }
  });
});
