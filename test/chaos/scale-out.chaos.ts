import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { makeBusiness, makeKey } from '../helpers/factories.js';
import { expectLedgerSound } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { getConfig } from '../../shared/config.js';
import { createWorkerRedis } from '../../shared/queues/connections.js';
import { closeQueues, createQueues } from '../../shared/queues/producer.js';
import { SKIPPED_SCAN } from '../../workers/settlement/scan-chain.job.js';
import { clientFor, expectEachPaidOnce, startOfframps, startService, untilEnded, type Service } from './service.js';

/** A router in front of web processes: each request, whatever connection it came on, goes to the next one in turn. */
async function roundRobin(backends: Service[]): Promise<{ proxy: http.Server; router: Service }> {
  let turn = 0;
  const proxy = http.createServer((req, res) => {
    const target = new URL(backends[turn++ % backends.length].base);
    const upstream = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/api/v1/business`;
  return { proxy, router: { ...backends[0], base, call: clientFor(base) } };
}

// Two dynos of each kind on one PostgreSQL and one Redis: two web processes behind a local router that hands each
// request to the next one in turn (as Heroku's router spreads requests), and two worker processes running every pool.
describe('chaos: scale-out, two web processes and two worker processes on one PostgreSQL and Redis', function () {
  this.timeout(600_000);
  let a: Service;
  let b: Service;
  let router: Service;
  let proxy: http.Server;
  before(async () => {
    // Scans every 250 ms, so a few seconds show whether two settlement pools ever scan a chain at once.
    [a, b] = await Promise.all([startService({ SETTLEMENT_POLL_MS: '250' }), startService({ SETTLEMENT_POLL_MS: '250' })]);
    ({ proxy, router } = await roundRobin([a, b]));
  });
  after(async () => {
    proxy?.close();
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it("a key's rate limit is one limit across web processes, not one each", async () => {
    const { businessId } = await makeBusiness();
    const { key } = await makeKey(businessId, { rateLimit: 20, rateWindowSeconds: 60 });
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++) statuses.push((await router.call(key, 'GET', '/account')).status);
    expect(statuses.filter((s) => s === 200)).to.have.length(20);
    expect(statuses.filter((s) => s === 429)).to.have.length(10);
  });

  it('one Idempotency-Key sent to both web processes at once creates one resource', async () => {
    const key = (await makeBusiness()).sandboxKey;
    for (let round = 0; round < 10; round++) {
      const idempotencyKey = randomUUID();
      const body = { external_reference: `both-${randomUUID()}` };
      const answers = await Promise.all([a.call(key, 'POST', '/customers', body, idempotencyKey), b.call(key, 'POST', '/customers', body, idempotencyKey)]);
      const created = answers.filter((x) => x.status === 201);
      expect(created.length, JSON.stringify(answers.map((x) => x.status))).to.be.at.least(1);
      for (const x of answers) expect(x.status).to.be.oneOf([201, 409]);
      // A second 201 is the first one replayed: the same customer.
      expect(new Set(created.map((x) => x.body.id)).size).to.equal(1);
      const [{ n }] = await (await getDs()).query(`SELECT count(*)::int AS n FROM customers WHERE external_reference = $1`, [body.external_reference]);
      expect(n).to.equal(1);
    }
  });

  it('off-ramps through both web processes, worked by both worker processes: each payout is asked for once', async () => {
    const key = (await makeBusiness()).sandboxKey;
    const ids = await startOfframps(router, key, 60);
    expect(await untilEnded(ids)).to.deep.equal({ completed: ids.length });
    await expectEachPaidOnce(ids);
    await expectLedgerSound();
  });

  it('each chain is scanned by one process at a time: one scheduled scan per interval, never two at once', async () => {
    await new Promise((r) => setTimeout(r, 4000));
    const redis = createWorkerRedis(getConfig().redisUrl);
    const queues = createQueues(redis, getConfig().redisPrefix);
    try {
      const jobs = (await queues.settlement.getJobs(['completed'], 0, 10_000)).filter((j) => j.name === 'chain.scan' && j.data.chain === 'base');
      const runs = jobs.map((j) => ({ start: j.processedOn!, skipped: j.returnvalue === SKIPPED_SCAN, ran: (j.returnvalue as { ran?: number[] })?.ran })).sort((x, y) => x.start - y.start);
      const spanMs = runs[runs.length - 1].start - runs[0].start;
      const scans = runs.filter((r) => !r.skipped).map((r) => ({ start: r.ran![0], end: r.ran![1] })).sort((x, y) => x.start - y.start);
      console.log(`      ${runs.length} scheduled scans of base in ${spanMs} ms, ${runs.length - scans.length} skipped while another ran`);
      expect(runs.length).to.be.at.least(5);
      // One scheduler, not one per process: about one run per interval, where two would make twice as many.
      expect(runs.length).to.be.at.most(Math.ceil(spanMs / 250) + 2);
      // A scan that outlasts its interval makes the next one step aside (the lease), so scans never overlap.
      for (let i = 1; i < scans.length; i++) expect(scans[i].start, 'a scan began before the previous one ended').to.be.at.least(scans[i - 1].end);
    } finally {
      await closeQueues(queues);
      redis.disconnect();
    }
  });
});
