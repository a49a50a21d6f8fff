// Retry for every stalled step that can run again (CONTRACT §14), in sandbox: an external-wallet payout stalled on a
// temporary provider failure, a confirmation count whose job ran out, an on-ramp's delivery that gave up. The last
// two are reached by running the jobs' final failure here, with no settlement pool to run them first.
import { expect } from 'chai';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { makeBusiness, makeKey, writeHeaders } from '../helpers/factories.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { expectLedgerSound, fund, history, kesBeneficiary, quote, untilStatus, verifiedWallet } from '../helpers/ramps.js';
import { until } from '../helpers/until.js';
import { getDs } from '../helpers/shared.js';
import { canRunAgain } from '../../shared/domain/transaction-actions.js';
import { confirmSettlementJob } from '../../workers/settlement/confirm-settlement.job.js';
import { deliverOnrampJob } from '../../workers/settlement/deliver-onramp.job.js';

describe('retry: every stalled step that can run again', function () {
  this.timeout(60_000);
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;

  before(async () => {
    api = await startApi();
    key = (await makeKey((await makeBusiness()).businessId, { rateLimit: 1_000_000 })).key;
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });
  afterEach(expectLedgerSound);

  const retry = (id: string) => api.http.post(`${BASE}/transactions/${id}/retry`).set(writeHeaders(key));
  const externalOfframp = async (beneficiary: string) => {
    const wallet = await verifiedWallet(api, key);
    await fund(api, key, wallet.id, '40');
    const q = await quote(api, key, { direction: 'offramp', source_amount: '20', beneficiary_id: beneficiary });
    const res = await api.http.post(`${BASE}/offramps`).set(writeHeaders(key)).send({ quote_id: q.id, funding_source: { wallet_id: wallet.id } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    await api.http.post(`${BASE}/sandbox/settlements/${res.body.id}/transfer`).set(writeHeaders(key)).send({});
    return res.body;
  };

  describe('with every pool', () => {
    before(async () => {
      pools = await startPools(['pricing', 'settlement', 'providers', 'sandbox']);
    });
    after(() => pools.close());

    it('an external-wallet payout stalled on a temporary provider failure is retried (not 409) and pays once', async () => {
      const tx = await externalOfframp(await kesBeneficiary(api, key, '+254722480003'));
      const stuck = await untilStatus(api, key, tx.id, ['action_required', 'failed', 'completed']);
      expect(stuck.failure.code).to.equal('provider_unavailable');
      expect((await api.http.post(`${BASE}/sandbox/transactions/${tx.id}/simulate`).set(writeHeaders(key)).send({ outcome: 'completed' })).status).to.equal(200);
      const res = await retry(tx.id);
      expect(res.status, JSON.stringify(res.body)).to.equal(202);
      expect((await untilStatus(api, key, tx.id, ['completed', 'failed'])).status).to.equal('completed');
      expect((await history(tx.id)).slice(-5)).to.deep.equal(['funded', 'action_required', 'funded', 'processing', 'completed']);
    });
  });

  describe('with the settlement pool down (its jobs run here), blocks a minute apart', () => {
    // The transfer shows one confirmation of 12 however slow the machine: at the tests' 5 ms a step it was deep 55 ms
    // after it was seen, and a loaded machine could fund the off-ramp at once (never awaiting_funds to stall).
    before(async () => {
      pools = await startPools(['pricing', 'providers', 'sandbox'], { env: { SANDBOX_STEP_MS: '60000' } });
    });
    after(() => pools.close());

    it('an external off-ramp whose confirmation job ran out (an RPC outage) is retried: confirmations are counted again, and it pays', async () => {
      const tx = await externalOfframp(await kesBeneficiary(api, key));
      await untilStatus(api, key, tx.id, ['awaiting_funds']);
      const ds = await getDs();
      expect((await ds.query(`SELECT confirmations FROM settlements WHERE transaction_id = $1`, [tx.id]))[0].confirmations).to.equal(1);
      await confirmSettlementJob.onFinalFailure!({ data: { transactionId: tx.id, round: 1 } } as never, new Error('RPC unavailable'), pools.deps);
      const stalled = await untilStatus(api, key, tx.id, ['action_required']);
      expect(stalled.failure.code).to.equal('step_failed');
      expect((await retry(tx.id)).status).to.equal(202);
      // Counted again on a chain whose blocks have all come (a step of 0: every confirmation at once).
      const deep = { ...pools.deps, config: { ...pools.deps.config, sandboxStepMs: 0 } };
      await until(async () => {
        const said = await confirmSettlementJob.process({ data: { transactionId: tx.id, round: 1 } } as never, deep);
        return said !== undefined && (await untilStatus(api, key, tx.id, ['awaiting_funds', 'funded', 'processing', 'completed'])).status !== 'awaiting_funds';
      }, { what: 'the confirmations counted' });
      expect((await untilStatus(api, key, tx.id, ['completed', 'failed'])).status).to.equal('completed');
      expect(await history(tx.id)).to.deep.equal(['created', 'awaiting_funds', 'action_required', 'awaiting_funds', 'funded', 'processing', 'completed']);
    });
  });

  describe('with the settlement pool down (its jobs run here)', () => {
    before(async () => {
      pools = await startPools(['pricing', 'providers', 'sandbox']);
    });
    after(() => pools.close());

    it('an on-ramp whose USDC delivery gave up (hot wallet short) is retried and delivered once', async () => {
      const customer = await createCustomer(api, key);
      const q = await quote(api, key, { direction: 'onramp', destination_amount: '25', wallet_id: customer.wallet.id });
      const res = await api.http.post(`${BASE}/onramps`).set(writeHeaders(key)).send({ quote_id: q.id, payment_method: { type: 'mobile_money', phone_number: '+254722480163', mobile_network: 'safaricom' } });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      await untilStatus(api, key, res.body.id, ['funded']);
      await deliverOnrampJob.onFinalFailure!({ data: { transactionId: res.body.id } } as never, new Error('the hot wallet holds too little USDC'), pools.deps);
      expect((await untilStatus(api, key, res.body.id, ['action_required'])).failure.code).to.equal('step_failed');
      expect((await retry(res.body.id)).status).to.equal(202);
      expect(await deliverOnrampJob.process({ data: { transactionId: res.body.id } } as never, pools.deps)).to.equal('completed');
      const done = await untilStatus(api, key, res.body.id, ['completed']);
      expect(done.destination.transaction_hash).to.match(/^0x[0-9a-f]{64}$/);
      expect(await history(res.body.id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'action_required', 'funded', 'processing', 'completed']);
    });

    it('an on-ramp whose delivery failed for good pays the collected fiat back to the payer, once, and says so in its refund', async () => {
      const customer = await createCustomer(api, key);
      const q = await quote(api, key, { direction: 'onramp', destination_amount: '25', wallet_id: customer.wallet.id });
      const res = await api.http.post(`${BASE}/onramps`).set(writeHeaders(key)).send({ quote_id: q.id, payment_method: { type: 'mobile_money', phone_number: '+254722480177', mobile_network: 'safaricom' } });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      await untilStatus(api, key, res.body.id, ['funded']);
      const forced = await api.http.post(`${BASE}/sandbox/transactions/${res.body.id}/simulate`).set(writeHeaders(key)).send({ outcome: 'failed' });
      expect(forced.status, JSON.stringify(forced.body)).to.equal(200);
      expect(forced.body.status).to.equal('failed');
      expect(forced.body.failure.code).to.equal('delivery_failed');
      expect(forced.body.refund).to.deep.include({ status: 'pending', amount: res.body.source.total_required, currency: 'KES', phone_number: '+254*****0177', provider_reference: null });
      const back = await until(async () => {
        const tx = (await api.http.get(`${BASE}/transactions/${res.body.id}`).set(writeHeaders(key))).body;
        return tx.refund.status !== 'pending' && tx;
      }, { what: 'the fiat refund' });
      expect(back.refund.status).to.equal('completed');
      expect(back.refund.provider_reference).to.match(/^S[A-Z0-9]{9}$/);
      const payouts = await (await getDs()).query(`SELECT evaluations FROM provider_requests WHERE kind = 'payout' AND reference = $1`, [res.body.id]);
      expect(payouts).to.deep.equal([{ evaluations: 1 }]);
      // Nothing was delivered, and the refund cannot be repeated by the delivery's own job.
      expect(await deliverOnrampJob.process({ data: { transactionId: res.body.id } } as never, pools.deps)).to.equal('not funded (failed)');
      expect(await history(res.body.id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'failed']);
    });
  });

  it('which stalled steps can run again', () => {
    expect(canRunAgain({ direction: 'offramp', funding_type: 'external_wallet', stalled_at: 'funded' })).to.equal(true);
    expect(canRunAgain({ direction: 'offramp', funding_type: 'external_wallet', stalled_at: 'awaiting_funds' })).to.equal(true);
    expect(canRunAgain({ direction: 'offramp', funding_type: 'external_wallet', stalled_at: 'created' })).to.equal(false);
    expect(canRunAgain({ direction: 'onramp', funding_type: null, stalled_at: 'funded' })).to.equal(true);
    expect(canRunAgain({ direction: 'onramp', funding_type: null, stalled_at: 'created' })).to.equal(true);
    expect(canRunAgain({ direction: 'onramp', funding_type: null, stalled_at: 'awaiting_funds' })).to.equal(true);
    expect(canRunAgain({ direction: 'offramp', funding_type: 'treasury', stalled_at: 'funded' })).to.equal(true);
  });
});
