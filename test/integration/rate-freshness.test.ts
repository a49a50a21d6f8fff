// CONTRACT 18 / issue 37 item 9: a live currency's rate is kept fresh ahead of need. The pricing pool refreshes every
// live currency well inside RATE_MAX_AGE_SECONDS; a refresh answered from its Redis cache still keeps the stored rate
// fresh; a request that finds the stored rate stale waits on a refresh of its own, never on one that already ended.
import { expect } from 'chai';
import { writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { until } from '../helpers/until.js';
import { BASE } from '../helpers/wallets.js';
import { startLiveRail, type LiveRail } from '../helpers/live-rail.js';
import { freshRateFromSource, rateRefreshEveryMs, storedFreshRate, storeRate } from '../../shared/domain/rates.js';
import { liveCurrencies } from '../../shared/providers/live-rails.js';
import { schedules } from '../../workers/registry.js';
import { loadConfig } from '../../shared/config.js';
import { createWorkerRedis } from '../../shared/queues/connections.js';

const MAX_AGE = '3';

describe('live rates kept fresh ahead of need (RATE_MAX_AGE_SECONDS 3)', function () {
  this.timeout(120_000);
  let rail: LiveRail;

  before(async () => {
    rail = await startLiveRail({ pools: ['pricing'], env: { RATE_MAX_AGE_SECONDS: MAX_AGE } });
  });
  after(async () => {
    // The schedule outlives the pools in Redis: later files' pricing pools have no rate source to refresh with.
    for (const s of schedules(loadConfig({ ...process.env, ...rail.env })).filter((d) => d.name === 'rate.refresh')) {
      await rail?.pools.deps.queues.pricing.removeJobScheduler(s.id);
    }
    await rail?.close();
  });

  it('every live currency has a repeatable refresh well inside RATE_MAX_AGE_SECONDS', () => {
    const config = loadConfig({ ...process.env, ...rail.env });
    const refreshes = schedules(config).filter((s) => s.name === 'rate.refresh');
    expect(refreshes.map((s) => (s.data as { currency: string }).currency)).to.deep.equal(liveCurrencies(config)).and.include('KES');
    for (const s of refreshes) expect(s.everyMs).to.be.at.most((Number(MAX_AGE) * 1000) / 2);
    expect(rateRefreshEveryMs({ rateMaxAgeSeconds: 60 })).to.equal(15_000);
    // Without a rate source nothing is live, and nothing is refreshed.
    expect(schedules(loadConfig({ ...process.env, RATE_SOURCE_URL: '' })).filter((s) => s.name === 'rate.refresh')).to.deep.equal([]);
  });

  it('a refresh answered from the cache still stores the rate', async () => {
    const ds = await getDs();
    const config = rail.pools.deps.config;
    const cache = createWorkerRedis(config.redisUrl);
    const currency = 'KES';
    // The pool's own scheduled refreshes (every 750 ms here) would ask the source and store its rate meanwhile.
    const pricing = rail.pools.deps.queues.pricing;
    await pricing.pause();
    await until(async () => (await pricing.getActiveCount()) === 0, { what: 'the pricing pool idle' });
    try {
      // The cache holds a fresh observation the stored row does not (another worker's, or one whose store lagged).
      const observed = { rate: '131.5', as_of: new Date().toISOString() };
      await cache.set(`${config.redisPrefix}:rate:live:${currency}`, JSON.stringify(observed), 'PX', 1500);
      await ds.query(`UPDATE exchange_rates SET as_of = now() - interval '1 hour' WHERE environment = 'live' AND currency = $1`, [currency]);
      const sourceCalls = rail.rates.requests;
      expect(await freshRateFromSource(ds, config, 'live', currency, cache)).to.deep.equal(observed);
      expect(rail.rates.requests, 'answered from the cache').to.equal(sourceCalls);
      expect(await storedFreshRate(ds, 'live', currency, Number(MAX_AGE))).to.deep.equal(observed);
      // A cached observation past half the allowed age would leave the request waiting on it too little time to read
      // it fresh (seen in CI on a loaded machine): the source is asked instead.
      const aging = { rate: '131.6', as_of: new Date(Date.now() - 2000).toISOString() };
      await cache.set(`${config.redisPrefix}:rate:live:${currency}`, JSON.stringify(aging), 'PX', 1500);
      expect((await freshRateFromSource(ds, config, 'live', currency, cache)).rate).to.equal(rail.rates.rate);
      expect(rail.rates.requests, 'asked the source').to.equal(sourceCalls + 1);
    } finally {
      cache.disconnect();
      await pricing.resume();
    }
  });

  it('intents created at random intervals around RATE_MAX_AGE_SECONDS never answer 503 while the source is up', async () => {
    const answers: number[] = [];
    for (let i = 0; i < 12; i++) {
      // 0.5 to 1.5 times RATE_MAX_AGE_SECONDS apart.
      await new Promise((resolve) => setTimeout(resolve, (0.5 + Math.random()) * Number(MAX_AGE) * 1000));
      const res = await rail.api.http.post(`${BASE}/payment-intents`).set(writeHeaders(rail.key))
        .send({ amount: { currency: 'KES', value: '1500' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
      answers.push(res.status);
      expect(res.status, `intent ${i}: ${JSON.stringify(res.body)}`).to.equal(201);
    }
    expect(answers).to.deep.equal(Array(12).fill(201));
  });

  // Last in this file: it takes the schedule away, which the tests above rely on.
  it('a request that finds the stored rate stale stages a refresh of its own: one that already ended moments before never swallows it', async () => {
    const ds = await getDs();
    const pricing = rail.pools.deps.queues.pricing;
    // Only requests refresh here: the schedule would keep the stored rate fresh whatever became of their jobs.
    for (const s of schedules(loadConfig({ ...process.env, ...rail.env })).filter((d) => d.name === 'rate.refresh')) await pricing.removeJobScheduler(s.id);
    const stale = () => ds.query(`UPDATE exchange_rates SET as_of = now() - interval '1 hour' WHERE environment = 'live' AND currency = 'KES'`);
    const intent = () => rail.api.http.post(`${BASE}/payment-intents`).set(writeHeaders(rail.key))
      .send({ amount: { currency: 'KES', value: '1500' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
    // The refresh job's id was once bucketed per 5 s: a second request inside the bucket found the first one's job
    // ended, was deduplicated onto it, and waited QUOTE_WAIT_MS for nothing (503). Both requests start in one bucket.
    await until(() => Date.now() % 5000 < 300, { timeoutMs: 6000, what: 'the start of a 5 s bucket' });
    await stale();
    const first = await intent();
    expect(first.status, JSON.stringify(first.body)).to.equal(201);
    // The first refresh has ended. Its observation is still in the pool's cache, and the pool stored it moments ago: a
    // refresh stores it again all the same (the row was written since).
    await new Promise((resolve) => setTimeout(resolve, 300));
    await stale();
    const second = await intent();
    expect(second.status, JSON.stringify(second.body)).to.equal(201);
  });
});

describe('a pricing unit storing the rate it prices with', () => {
  it('never waits for another transaction writing the stored rate, and stores it on the next price once the row is free', async () => {
    const ds = await getDs();
    const config = loadConfig(process.env);
    await ds.query(`DELETE FROM exchange_rates WHERE environment = 'sandbox' AND currency = 'KES'`);
    await storeRate(ds, 'sandbox', 'KES', { rate: '129.000000', as_of: new Date(Date.now() - 3_600_000).toISOString() });
    const holder = ds.createQueryRunner();
    await holder.connect();
    try {
      await holder.startTransaction();
      await holder.query(`SELECT 1 FROM exchange_rates WHERE environment = 'sandbox' AND currency = 'KES' FOR UPDATE`);
      const started = Date.now();
      const timedOut = new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), 3_000).unref());
      const stored = freshRateFromSource(ds, config, 'sandbox', 'KES').then(() => 'answered' as const);
      expect(await Promise.race([stored, timedOut])).to.equal('answered');
      expect(Date.now() - started).to.be.below(2_000);
    } finally {
      await holder.rollbackTransaction();
      await holder.release();
    }
    expect(await storedFreshRate(ds, 'sandbox', 'KES', 60)).to.equal(null);
    // Stepping aside was not taken for a store: the next price writes it at once, the row being free.
    await freshRateFromSource(ds, config, 'sandbox', 'KES');
    expect(await storedFreshRate(ds, 'sandbox', 'KES', 60)).to.not.equal(null);
  });
});
