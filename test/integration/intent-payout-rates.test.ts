import { expect } from 'chai';
import { bearer, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE } from '../helpers/wallets.js';
import { expectLedgerSound } from '../helpers/ramps.js';
import { until } from '../helpers/until.js';
import { liveBeneficiary, startLiveRail, type LiveRail } from '../helpers/live-rail.js';
import { sweepJob } from '../../workers/sweeper/sweep.job.js';

// CONTRACT section 14: a payment intent's automatic payout that cannot be priced for lack of a rate waits
// (payout_status "pending") and goes out when rates return; it never fails for a rate-source outage.

describe('an intent payout through a rate-source outage (live, fake Daraja and rate source)', function () {
  this.timeout(90_000);
  let rail: LiveRail;

  before(async () => {
    rail = await startLiveRail({ pools: ['pricing', 'providers'] });
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  it('stays pending while rates are stale, past the job\'s attempts, and starts once they return', async () => {
    const beneficiaryId = await liveBeneficiary(rail, 'mobile_money', { phone_number: '+254712345678', mobile_network: 'safaricom' });
    const create = await rail.api.http.post(`${BASE}/payment-intents`).set(writeHeaders(rail.key)).send({
      amount: { currency: 'KES', value: '1500' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base', beneficiary_id: beneficiaryId },
    });
    expect(create.status, JSON.stringify(create.body)).to.equal(201);
    const id = create.body.id;
    // The rate source keeps answering, with a rate too old to price with: the payout cannot be priced.
    rail.rates.ageMs = 10 * 60_000;
    const collect = await rail.api.http.post(`${BASE}/payment-intents/${id}/collect`).set(writeHeaders(rail.key))
      .send({ payment_method: { type: 'mobile_money', phone_number: '+254712340013', mobile_network: 'safaricom' } });
    expect(collect.status).to.equal(202);
    const get = async () => (await rail.api.http.get(`${BASE}/payment-intents/${id}`).set(bearer(rail.key))).body;
    let last: Record<string, any> = {};
    // The payout job runs out of attempts (about 7.5 s of backoff): the payout waits, it does not fail.
    const waiting = await until(async () => {
      last = await get();
      return last.settlement.payout_error !== null && last;
    }, { what: 'the payout job giving up', timeoutMs: 30_000, everyMs: 200, describe: () => last.settlement });
    expect(waiting.status).to.equal('completed');
    expect(waiting.settlement.payout_status).to.equal('pending');
    expect(waiting.settlement.payout_transaction_id).to.equal(null);
    expect(waiting.settlement.payout_error).to.match(/waiting/);
    // Rates return; the sweeper's rule for paid intents whose payout never started tries it again.
    rail.rates.ageMs = 1000;
    await (await getDs()).query(`UPDATE payment_intents SET updated_at = now() - interval '5 minutes' WHERE id = $1`, [id]);
    const counts = (await sweepJob.process({ data: {} } as never, rail.pools.deps)) as Record<string, number>;
    expect(counts['paid payment intents whose payout never started']).to.be.at.least(1);
    const paid = await until(async () => {
      last = await get();
      return ['completed', 'failed'].includes(last.settlement.payout_status) && last;
    }, { what: 'the payout going out', timeoutMs: 30_000, everyMs: 200, describe: () => last.settlement });
    expect(paid.settlement).to.include({ payout_status: 'completed', payout_error: null });
    const history: { to_status: string }[] = await (await getDs()).query(
      `SELECT to_status FROM status_history WHERE resource_id = $1 AND resource_type = 'payment_intent' AND to_status IN ('pending', 'processing', 'completed', 'failed') ORDER BY id`, [id],
    );
    expect(history.map((h) => h.to_status)).to.not.include('failed');
  });
});
