import { expect } from 'chai';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { routes } from '../../api/routes/index.js';
import { fullPath } from '../../api/openapi/document.js';
import { POOLS } from '../../shared/queues/registry.js';
import { appRoutes } from '@bull-board/api/dist/routes.js';

describe('platform endpoints', () => {
  let api: ApiHarness;
  before(async () => {
    api = await startApi();
  });
  after(() => api.close());

  it('GET /health answers without auth', async () => {
    const res = await api.http.get('/health');
    expect(res.status).to.equal(200);
    expect(res.body.status).to.equal('ok');
    expect(res.headers['x-request-id']).to.match(/^[0-9a-f-]{36}$/);
  });

  it('GET /ready checks PostgreSQL and Redis', async () => {
    const res = await api.http.get('/ready');
    expect(res.status).to.equal(200);
    expect(res.body.checks).to.deep.equal({ postgres: 'ok', redis: 'ok' });
    const down = await startApi({ env: { REDIS_URL: 'redis://127.0.0.1:1' } });
    try {
      const bad = await down.http.get('/ready');
      expect(bad.status).to.equal(503);
      expect(bad.body.checks.redis).to.equal('unreachable');
    } finally {
      await down.close();
    }
  });

  it('GET /openapi.json serves the OpenAPI 3.1.0 document, contract 1.0.0, with every route', async () => {
    const res = await api.http.get('/openapi.json');
    expect(res.status).to.equal(200);
    expect(res.body.openapi).to.equal('3.1.0');
    expect(res.body.info.version).to.equal('1.0.0');
    for (const route of routes) {
      const op = res.body.paths[fullPath(route)]?.[route.method];
      expect(op, `${route.method} ${route.path}`).to.be.an('object');
      expect(op.operationId).to.equal(route.operationId);
      expect(op.responses).to.have.property('401');
    }
    // The headers the contract promises are documented: rate limits everywhere, Retry-After, replays.
    // Shared responses are $refs into components.responses.
    const resolve = (r: { $ref?: string }) => (r.$ref ? res.body.components.responses[r.$ref.split('/').pop()!] : r);
    const create = res.body.paths['/api/v1/business/customers'].post;
    expect(create.responses['201'].headers).to.include.keys('X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'Idempotent-Replayed');
    for (const status of ['409', '429', '503']) expect(resolve(create.responses[status]).headers).to.include.keys('Retry-After', 'X-RateLimit-Limit');
    expect(create.parameters.map((p: { $ref?: string }) => p.$ref)).to.include('#/components/parameters/IdempotencyKey');
    for (const name of ['Error', 'ErrorResponse', 'ListMeta', 'DecimalAmount', 'BusinessAccount']) {
      expect(res.body.components.schemas).to.have.property(name);
    }
  });

  it('the X-Request-Id of the caller is never trusted as ours', async () => {
    const res = await api.http.get('/health').set('X-Request-Id', '11111111-1111-4111-8111-111111111111');
    expect(res.headers['x-request-id']).not.to.equal('11111111-1111-4111-8111-111111111111');
  });

  describe('Bull Board', () => {
    it('is off when ADMIN_USER / ADMIN_PASSWORD are unset, and so are the metrics', async () => {
      const res = await api.http.get('/admin/queues');
      expect(res.status).to.equal(404);
      expect((await api.http.get('/metrics')).status).to.equal(404);
    });

    it('asks for basic auth, refuses wrong credentials, and lists every queue', async () => {
      const board = await startApi({ env: { ADMIN_USER: 'ops', ADMIN_PASSWORD: 's3cret-pass' } });
      try {
        const none = await board.http.get('/admin/queues');
        expect(none.status).to.equal(401);
        expect(none.headers['www-authenticate']).to.match(/^Basic/);
        expect((await board.http.get('/admin/queues').auth('ops', 'wrong')).status).to.equal(401);
        expect((await board.http.get('/admin/queues').auth('other', 's3cret-pass')).status).to.equal(401);
        const page = await board.http.get('/admin/queues').auth('ops', 's3cret-pass');
        expect(page.status).to.equal(200);
        expect(page.text).to.match(/<html/i);
        const api = await board.http.get('/admin/queues/api/queues').auth('ops', 's3cret-pass');
        expect(api.status).to.equal(200);
        const names = (api.body.queues as { name: string }[]).map((q) => q.name).sort();
        expect(names).to.deep.equal([...POOLS].sort());
      } finally {
        await board.close();
      }
    });

    it('is read-only: every action the board offers (add, edit, retry, promote, clean, pause, empty, remove...) is refused', async () => {
      const board = await startApi({ env: { ADMIN_USER: 'ops', ADMIN_PASSWORD: 's3cret-pass' } });
      const queue = board.deps.queues.pricing;
      const jobId = `board-${Date.now()}`;
      try {
        // A delayed job and a failed one, so retry, promote and clean would each have something to act on.
        await queue.add('refresh-rate', { currency: 'KES' }, { jobId, delay: 3_600_000 });
        const before = { counts: await queue.getJobCounts(), paused: await queue.isPaused(), data: (await queue.getJob(jobId))?.data };
        // Bull Board's own route table: a write route a later version adds is tried too.
        const writes = appRoutes.api.flatMap((r) => ([] as string[]).concat(r.method).filter((m) => m !== 'get').map((method) => ({ method, route: r.route })));
        expect(writes.length).to.be.greaterThan(20);
        for (const route of writes) {
          for (const template of ([] as string[]).concat(route.route)) {
            const path = template.replace(':queueName', queue.name).replace(':jobId', jobId).replace(':queueStatus', 'delayed').replace(':schedulerId', 'x');
            const res = await (board.http as any)[route.method](`/admin/queues${path}`).auth('ops', 's3cret-pass')
              .send({ name: 'chain.send', data: { to: '0x0000000000000000000000000000000000000001', amount: '1000' }, concurrency: 1, delay: 0, priority: 1 });
            expect(res.status, `${route.method.toUpperCase()} ${path}: ${res.text}`).to.equal(403);
            expect(res.body.error.code).to.equal('insufficient_scope');
          }
        }
        // Nothing moved: the job is where it was with its data, nothing was added, and the queue still runs.
        expect(await queue.getJobCounts()).to.deep.equal(before.counts);
        expect(await queue.isPaused()).to.equal(before.paused).and.equal(false);
        expect((await queue.getJob(jobId))?.data).to.deep.equal(before.data);
        expect(await queue.getJobState(jobId)).to.equal('delayed');
        // The page says so too: the UI hides its buttons.
        const listed = await board.http.get('/admin/queues/api/queues').auth('ops', 's3cret-pass');
        expect(listed.status).to.equal(200);
        for (const q of listed.body.queues) expect(q.readOnlyMode, q.name).to.equal(true);
      } finally {
        await queue.remove(jobId);
        await board.close();
      }
    });

    it('allows 10 wrong credentials per address per minute, on the board and /metrics together, then 429 before comparing', async () => {
      const board = await startApi({ env: { ADMIN_USER: 'ops', ADMIN_PASSWORD: 's3cret-pass', TRUST_PROXY: '1' } });
      try {
        const from = (ip: string, path = '/admin/queues') => board.http.get(path).set('X-Forwarded-For', ip);
        // Asking without credentials (a browser before its prompt) is not a failure.
        for (let i = 0; i < 3; i++) expect((await from('192.0.2.80')).status).to.equal(401);
        for (let i = 0; i < 10; i++) expect((await from('192.0.2.80', i % 2 ? '/metrics' : '/admin/queues').auth('ops', `guess-${i}`)).status, `guess ${i}`).to.equal(401);
        for (const path of ['/admin/queues', '/metrics']) {
          const limited = await from('192.0.2.80', path).auth('ops', 'another-guess');
          expect(limited.status, path).to.equal(429);
          expect(Number(limited.headers['retry-after'])).to.be.within(1, 60);
          // The right password is refused the same way while the address waits: a lucky guess cannot be recognised.
          expect((await from('192.0.2.80', path).auth('ops', 's3cret-pass')).status, path).to.equal(429);
        }
        // Another address is unaffected.
        expect((await from('192.0.2.81').auth('ops', 's3cret-pass')).status).to.equal(200);
        // IPv6 guesses are counted by /64: ten addresses of one /64 are one guesser.
        for (let i = 0; i < 10; i++) expect((await from(`2001:db8:80:1::${i + 1}`).auth('ops', `v6-guess-${i}`)).status, `v6 guess ${i}`).to.equal(401);
        expect((await from('2001:db8:80:1:ffff::77').auth('ops', 's3cret-pass')).status).to.equal(429);
        expect((await from('2001:db8:80:2::1').auth('ops', 's3cret-pass')).status).to.equal(200);
        expect((await from('192.0.2.81', '/metrics').auth('ops', 's3cret-pass')).status).to.equal(200);
      } finally {
        await board.close();
      }
    });
  });
});
