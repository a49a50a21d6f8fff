import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { makeBusiness, makeKey } from '../helpers/factories.js';
import { expectLedgerSound } from '../helpers/ramps.js';
import { startTcpRelay, type RedisProxy } from '../helpers/redis-proxy.js';
import { testDatabaseUrl, testRedisUrl } from '../env.js';
import { until } from '../helpers/until.js';
import { getDs } from '../helpers/shared.js';
import { startOfframps, startService, untilEnded, type Answer, type Service } from './service.js';

const OUTAGE_MS = Number(process.env.CHAOS_OUTAGE_MS ?? 4000);

/** Requests every 50 ms for as long as `during` runs: a GET and a write each round; every answer kept. */
async function underLoad(service: Service, key: string, during: () => Promise<void>): Promise<{ answers: (Answer & { ms: number; kind: string })[] }> {
  const answers: (Answer & { ms: number; kind: string })[] = [];
  let running = true;
  const loader = (async () => {
    while (running) {
      for (const [kind, send] of [
        ['read', () => service.call(key, 'GET', '/account')],
        ['write', () => service.call(key, 'POST', '/customers', { external_reference: `load-${randomUUID()}` })],
      ] as const) {
        const started = performance.now();
        const answer = await send().catch((err: Error) => ({ status: 0, headers: new Headers(), body: { error: err.message } }));
        answers.push({ ...answer, ms: performance.now() - started, kind });
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  await during();
  running = false;
  await loader;
  return { answers };
}

function summary(answers: (Answer & { kind: string })[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const a of answers) out[`${a.kind} ${a.status}`] = (out[`${a.kind} ${a.status}`] ?? 0) + 1;
  return out;
}

for (const dependency of ['PostgreSQL', 'Redis'] as const) {
  describe(`chaos: ${dependency} unreachable for ${OUTAGE_MS} ms under load`, function () {
    this.timeout(300_000);
    let relay: RedisProxy;
    let service: Service;
    before(async () => {
      relay = dependency === 'PostgreSQL' ? await startTcpRelay(testDatabaseUrl(), 5432) : await startTcpRelay(testRedisUrl(), 6379);
      // Slow steps (about 3 s a lifecycle), so the outage lands in the middle of the off-ramps, not after them.
      const via: Record<string, string> = dependency === 'PostgreSQL' ? { DATABASE_URL: relay.url } : { REDIS_URL: relay.url };
      service = await startService({ ...via, SANDBOX_STEP_MS: '400' });
    });
    after(async () => {
      relay?.resume();
      await service?.stop();
      await relay?.close();
    });

    it('answers clean 503s with Retry-After (never a 500, never a hang), recovers by itself, and loses no accepted off-ramp', async () => {
      // A limit no test client reaches: the faults, not the rate limit, are under test.
    const key = (await makeKey((await makeBusiness()).businessId, { rateLimit: 1_000_000 })).key;
      const ids = await startOfframps(service, key, 20);
      let recoveredMs = 0;
      let inFlight = 0;
      const { answers } = await underLoad(service, key, async () => {
        await new Promise((r) => setTimeout(r, 500));
        inFlight = (await (await getDs()).query(`SELECT count(*)::int AS n FROM transactions WHERE id = ANY($1) AND status NOT IN ('completed', 'failed', 'action_required')`, [ids]))[0].n;
        relay.cut();
        await new Promise((r) => setTimeout(r, OUTAGE_MS));
        relay.resume();
        const back = performance.now();
        await until(async () => (await service.call(key, 'POST', '/customers', { external_reference: `probe-${randomUUID()}` })).status === 201, { timeoutMs: 60_000, everyMs: 100, what: 'writes succeeding again' });
        recoveredMs = performance.now() - back;
        await new Promise((r) => setTimeout(r, 500));
      });
      const counts = summary(answers);
      expect(inFlight, 'off-ramps under way when it went down').to.be.greaterThan(0);
      console.log(`      ${inFlight} of ${ids.length} off-ramps under way at the cut; ${answers.length} requests: ${JSON.stringify(counts)}; writes again ${recoveredMs.toFixed(0)} ms after ${dependency} came back; slowest ${Math.max(...answers.map((a) => a.ms)).toFixed(0)} ms`);
      const unavailable = answers.filter((a) => a.status === 503);
      expect(unavailable.length, 'the outage was felt').to.be.greaterThan(0);
      for (const a of answers) {
        expect(a.status, JSON.stringify(a.body)).to.be.oneOf([200, 201, 503]);
        expect(a.ms, 'answered, not hung').to.be.lessThan(10_000);
      }
      for (const a of unavailable) {
        expect(a.body.error.code).to.equal('service_unavailable');
        expect(Number(a.headers.get('retry-after'))).to.be.at.least(1);
      }
      // Every customer a 201 announced exists, once (an answered write is never lost, an unanswered one never half-made).
      const created = answers.filter((a) => a.status === 201).map((a) => a.body.id);
      const [{ n }] = await (await getDs()).query(`SELECT count(*)::int AS n FROM customers WHERE id = ANY($1)`, [created]);
      expect(n).to.equal(created.length);
      expect(await untilEnded(ids, 180_000)).to.deep.equal({ completed: ids.length });
      await expectLedgerSound();
    });
  });
}
