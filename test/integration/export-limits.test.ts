// CONTRACT 18 (CSV exports): one API key runs at most EXPORTS_PER_KEY (2) exports at a time, a third answers 429
// rate_limited with Retry-After; an export whose reader stops reading for EXPORT_STALL_MS (30 s) is ended, its rows'
// reader closed and its slot freed. Run through the real pipeline (a test operation with a CSV answer) on a real socket.
import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { makeBusiness, makeKey } from '../helpers/factories.js';
import { until } from '../helpers/until.js';
import type { RouteDef } from '../../api/routes/route.js';

const ROW = 'x'.repeat(1000);
const state = { opened: 0, closed: 0, rows: 0, hold: null as Promise<void> | null };

const exportRoute: RouteDef = {
  method: 'get', path: '/test-export', operationId: 'testExport', summary: 'test', tag: 'Test', scope: null,
  responses: { '200': { description: 'ok' } },
  handler: async () => ({ status: 200, body: {} }),
  csv: {
    columns: ['n', 'filler'],
    text: ['filler'],
    async *rows() {
      state.opened += 1;
      try {
        for (let n = 0; n < 1_000_000; n++) {
          // Held exports wait here after their first rows, so they stay running.
          if (n === 10 && state.hold) await state.hold;
          state.rows += 1;
          yield { n, filler: ROW };
        }
      } finally {
        state.closed += 1;
      }
    },
  },
};

describe('CSV exports: per-key concurrency and stalled readers', function () {
  this.timeout(60_000);
  let api: ApiHarness;
  let server: http.Server;
  let base: string;
  let key: string;
  let otherKey: string;
  let keyId: string;

  before(async () => {
    api = await startApi({ extraRoutes: [exportRoute], env: { EXPORT_STALL_MS: '1000' } });
    server = api.app.listen(0);
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const biz = await makeBusiness();
    const made = await makeKey(biz.businessId, { rateLimit: 1_000_000 });
    key = made.key;
    keyId = made.id;
    otherKey = (await makeKey(biz.businessId, { rateLimit: 1_000_000 })).key;
  });
  after(async () => {
    server?.closeAllConnections();
    server?.close();
    await api?.close();
  });

  /** An export request whose answer is not read: resolves with the response once its headers are in. */
  function openExport(bearerKey: string): Promise<{ res: http.IncomingMessage; req: http.ClientRequest }> {
    return new Promise((resolve, reject) => {
      const req = http.get(`${base}/api/v1/business/test-export`, { headers: { Authorization: `Bearer ${bearerKey}`, Accept: 'text/csv' } }, (res) => {
        res.pause();
        resolve({ res, req });
      });
      req.on('error', reject);
    });
  }
  const slots = () => api.deps.redis.zcard(`${api.deps.config.redisPrefix}:exports:${keyId}`);

  it('a third concurrent export of one key answers 429 rate_limited with Retry-After; another key and a later export are served', async () => {
    let release!: () => void;
    state.hold = new Promise<void>((r) => (release = r));
    const first = await openExport(key);
    const second = await openExport(key);
    try {
      expect([first.res.statusCode, second.res.statusCode]).to.deep.equal([200, 200]);
      expect(await slots()).to.equal(2);
      const third = await fetch(`${base}/api/v1/business/test-export`, { headers: { Authorization: `Bearer ${key}`, Accept: 'text/csv' } });
      expect(third.status).to.equal(429);
      expect(Number(third.headers.get('retry-after'))).to.be.within(1, 60);
      const body = await third.json();
      expect(body.error.code).to.equal('rate_limited');
      expect(body.error.message).to.match(/2 exports/);
      // The limit is per API key.
      const other = await openExport(otherKey);
      expect(other.res.statusCode).to.equal(200);
      other.req.destroy();
      // JSON answers of the same operation are not exports.
      expect((await fetch(`${base}/api/v1/business/test-export`, { headers: { Authorization: `Bearer ${key}` } })).status).to.equal(200);
    } finally {
      state.hold = null;
      release();
      first.req.destroy();
      second.req.destroy();
    }
    // Both slots come back once their exports end (here: their readers went away).
    await until(async () => (await slots()) === 0);
    const again = await openExport(key);
    expect(again.res.statusCode).to.equal(200);
    again.req.destroy();
    await until(async () => (await slots()) === 0);
  });

  it('an export whose reader stops reading is ended after EXPORT_STALL_MS: its rows are closed and its slot freed', async () => {
    const before = { ...state };
    const opened = Date.now();
    const stalled = await openExport(key);
    expect(stalled.res.statusCode).to.equal(200);
    const ended = new Promise<number>((resolve) => {
      const at = Date.now();
      stalled.res.on('close', () => resolve(Date.now() - at));
      stalled.res.on('aborted', () => resolve(Date.now() - at));
    });
    // The reader never reads: the server fills the socket's buffers, waits, then gives up.
    await until(async () => state.closed > before.closed, { timeoutMs: 15_000 });
    // Ended for a stall of EXPORT_STALL_MS (1 s here), not at the first moment the reader fell behind.
    expect(Date.now() - opened, 'ms until the stalled export was ended').to.be.at.least(900);
    expect(state.opened - before.opened).to.equal(1);
    expect(state.rows - before.rows, 'rows read before the stall ended it').to.be.below(1_000_000);
    expect(await slots()).to.equal(0);
    // The client sees the answer cut, never a complete-looking file.
    stalled.res.resume();
    expect(await ended).to.be.a('number');
    expect(stalled.res.complete).to.equal(false);
    // The key can export again at once.
    const next = await fetch(`${base}/api/v1/business/test-export`, { headers: { Authorization: `Bearer ${key}`, Accept: 'text/csv' } });
    expect(next.status).to.equal(200);
    await next.body?.cancel();
  });

  it('a reader that keeps reading, in bursts with pauses shorter than EXPORT_STALL_MS, is not stalled: its export runs on', async () => {
    const before = { ...state };
    const slow = await openExport(key);
    expect(slow.res.statusCode).to.equal(200);
    let bytes = 0;
    slow.res.on('data', (chunk: Buffer) => (bytes += chunk.length));
    // Reads for 100 ms, then takes nothing for 600 ms (under the 1 s stall), again and again for 3.5 s: more than
    // three stalls' time in all, so an export cut by its total time rather than by a stall would be ended.
    const until3500 = Date.now() + 3500;
    try {
      while (Date.now() < until3500) {
        slow.res.resume();
        await new Promise((resolve) => setTimeout(resolve, 100));
        slow.res.pause();
        await new Promise((resolve) => setTimeout(resolve, 600));
      }
      expect(state.closed - before.closed, 'the export was ended').to.equal(0);
      expect(slow.res.complete).to.equal(false);
      expect(bytes).to.be.greaterThan(0);
    } finally {
      slow.req.destroy();
    }
    await until(async () => (await slots()) === 0);
  });
});
