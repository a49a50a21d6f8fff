import { expect } from 'chai';
import { bearer, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { until } from '../helpers/until.js';
import { BASE } from '../helpers/wallets.js';
import { startLiveRail, type LiveRail } from '../helpers/live-rail.js';
import { INTENT_CHECK_ROUNDS, MAX_CHECK_ROUNDS } from '../../shared/domain/provider-results.js';
import { sweepJob } from '../../workers/sweeper/sweep.job.js';

// A payment intent's prompt that M-Pesa named but never decides (STK Query answers "being processed" for as long as
// it is asked, no callback) is never left `processing` for good: it is asked about longer and less often, then the
// intent waits for payment again; and a check series Redis lost is started again by the sweeper under ids of its own
// (found by the fault run: an intent stayed processing while its collect job was re-run to no effect).
describe('a payment intent whose prompt M-Pesa never decides', function () {
  this.timeout(60_000);
  let rail: LiveRail;
  before(async () => {
    rail = await startLiveRail({ env: { DARAJA_STATUS_QUERY_AFTER_MS: '100' } });
  });
  after(() => rail?.close());

  /**
   * Pauses the providers pool and waits for the check it may be running: pause() lets an active job finish, and a
   * check that asks touches its request's updated_at after the test set it back (a flake in the full suite).
   */
  async function pauseProviders(): Promise<void> {
    const queue = rail.pools.deps.queues.providers;
    await queue.pause();
    await until(async () => (await queue.getActiveCount()) === 0, { what: 'the providers pool idle' });
  }

  async function promptedIntent(phone: string): Promise<string> {
    const create = await rail.api.http.post(`${BASE}/payment-intents`).set(writeHeaders(rail.key))
      .send({ amount: { currency: 'KES', value: '1500' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
    expect(create.status, JSON.stringify(create.body)).to.equal(201);
    const collect = await rail.api.http.post(`${BASE}/payment-intents/${create.body.id}/collect`).set(writeHeaders(rail.key))
      .send({ payment_method: { type: 'mobile_money', phone_number: phone, mobile_network: 'safaricom' } });
    expect(collect.status).to.equal(202);
    return create.body.id;
  }
  const get = async (id: string) => (await rail.api.http.get(`${BASE}/payment-intents/${id}`).set(bearer(rail.key))).body;
  const queries = (since: number) => rail.fake.log.filter((l) => l.path === '/mpesa/stkpushquery/v1/query' && l.at >= since).length;

  it('is asked about INTENT_CHECK_ROUNDS times, then waits for payment again with provider_unavailable', async () => {
    const started = Date.now();
    const id = await promptedIntent('+254712340098');
    const back = await until(async () => { const i = await get(id); return i.status !== 'processing' && i; }, { what: 'the intent moved on', timeoutMs: 30_000 });
    expect(back.status).to.equal('awaiting_payment');
    expect(back.last_payment_error.code).to.equal('provider_unavailable');
    expect(queries(started)).to.be.at.least(INTENT_CHECK_ROUNDS).and.be.greaterThan(MAX_CHECK_ROUNDS);
  });

  it('the sweeper starts a new series of checks for a prompt no check asks about, not the collect job again', async () => {
    const id = await promptedIntent('+254712310098');
    const ds = await getDs();
    await until(async () => (await ds.query(`SELECT 1 FROM provider_requests WHERE kind = 'collection' AND reference = $1`, [`${id}-1`])).length === 1, { what: 'the prompt sent' });
    await ds.query(`UPDATE payment_intents SET updated_at = now() - interval '10 minutes' WHERE id = $1`, [id]);
    const seriesOf = async () => (await rail.pools.deps.queues.providers.getJobs(['waiting', 'delayed', 'active', 'completed', 'prioritized']))
      .filter((j) => j.name === 'provider.check' && (j.data as { intentId?: string }).intentId === id && (j.data as { series?: number }).series);
    // Its checks are under way: nothing is started beside them.
    let counts = (await sweepJob.process({ data: {} } as never, rail.pools.deps)) as Record<string, number>;
    expect(await seriesOf(), 'no second series beside running checks').to.have.length(0);
    // No check has asked for a while (lost): a new series. (The pool is paused meanwhile, so no running check asks.)
    await pauseProviders();
    try {
      await ds.query(`UPDATE provider_requests SET updated_at = now() - interval '10 minutes' WHERE kind = 'collection' AND reference = $1`, [`${id}-1`]);
      counts = (await sweepJob.process({ data: {} } as never, rail.pools.deps)) as Record<string, number>;
      expect(counts['payment intent prompts no check is asking about']).to.be.at.least(1);
      expect((await seriesOf()).length, 'a check of a new series').to.be.at.least(1);
    } finally {
      await rail.pools.deps.queues.providers.resume();
    }
    const jobs = await rail.pools.deps.queues.providers.getJobs(['waiting', 'delayed', 'active', 'completed', 'prioritized']);
    expect(jobs.filter((j) => j.name === 'intent.collect' && (j.data as { intentId?: string }).intentId === id)).to.have.length(1);
  });

  it('a prompt still out after its intent was paid another way, its checks lost, is asked about again and its payment credited (fault seed 6015)', async () => {
    // The payer approves (a success STK Query reports) but the callback is lost; the intent is paid in USDC meanwhile.
    // M-Pesa keeps the prompt undecided until the scene is set: a check that ran first would find it paid (a flake
    // in the full suite, where the first check can come before the pool is paused).
    rail.fake.stkQueryLagMs = 4_000;
    const id = await promptedIntent('+254712320099');
    const ds = await getDs();
    await until(async () => (await ds.query(`SELECT 1 FROM provider_requests WHERE kind = 'collection' AND reference = $1`, [`${id}-1`])).length === 1, { what: 'the prompt sent' });
    const queue = rail.pools.deps.queues.providers;
    await pauseProviders();
    try {
      // Redis loses the prompt's checks; the intent completes another way.
      for (const job of await queue.getJobs(['delayed', 'waiting', 'prioritized'])) if ((job.data as { intentId?: string }).intentId === id) await job.remove();
      await ds.query(`UPDATE payment_intents SET status = 'completed', completed_at = now() WHERE id = $1`, [id]);
      await ds.query(`UPDATE provider_requests SET updated_at = now() - interval '10 minutes' WHERE kind = 'collection' AND reference = $1`, [`${id}-1`]);
      const counts = (await sweepJob.process({ data: {} } as never, rail.pools.deps)) as Record<string, number>;
      expect(counts['payment intent prompts no check is asking about']).to.be.at.least(1);
    } finally {
      await queue.resume();
      rail.fake.stkQueryLagMs = 0;
    }
    const credited = await until(async () => (await ds.query(
      `SELECT payment_method, status FROM treasury_deposits WHERE payment_intent_id = $1 AND payment_method = 'mobile_money'`, [id]))[0], { what: 'the M-Pesa payment credited', timeoutMs: 20_000 });
    expect(credited.payment_method).to.equal('mobile_money');
  });
});
