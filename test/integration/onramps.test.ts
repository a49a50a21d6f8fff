import { expect } from 'chai';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { balance, expectLedgerSound, fund, history, kesBeneficiary, offramp, quote, untilStatus, verifiedWallet } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { providerCallStats } from '../../shared/providers/sandbox-provider.js';

describe('on-ramps end to end in sandbox, and the transactions area', function () {
  this.timeout(30_000);
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;
  let walletId: string;

  before(async () => {
    api = await startApi();
    pools = await startPools(['pricing', 'settlement', 'providers', 'sandbox']);
    key = (await makeBusiness()).sandboxKey;
    walletId = (await createCustomer(api, key)).wallet.id;
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });
  afterEach(expectLedgerSound);

  const onrampQuote = (wallet = walletId) => quote(api, key, { direction: 'onramp', destination_amount: '25', wallet_id: wallet });
  const onramp = (quoteId: string, phone = '+254722480163', extra: object = {}) =>
    api.http.post(`${BASE}/onramps`).set(writeHeaders(key)).send({ quote_id: quoteId, payment_method: { type: 'mobile_money', phone_number: phone, mobile_network: 'safaricom' }, ...extra });

  it('collects, then delivers the USDC to the managed wallet with a transaction hash', async () => {
    const q = await onrampQuote();
    const res = await onramp(q.id);
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body).to.deep.include({ direction: 'onramp', status: 'created', funding_source: null });
    expect(res.body.payment_source).to.deep.include({ type: 'mobile_money', mobile_network: 'safaricom' });
    // The payer's number is shown with its country code and last 4 digits only (CONTRACT §15).
    expect(res.body.payment_source.phone_number).to.equal('+254*****0163');
    const done = await untilStatus(api, key, res.body.id, ['completed', 'failed']);
    expect(done.status).to.equal('completed');
    expect(done.destination).to.deep.include({ asset: 'USDC', amount: '25.000000', chain: 'base' });
    expect(done.destination.transaction_hash).to.match(/^0x[0-9a-f]{64}$/);
    expect(done.payment_source.reference).to.match(/^SBX/);
    expect(await history(res.body.id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'processing', 'completed']);
    expect(await balance(api, key, walletId)).to.equal('25.000000');
    expect((await providerCallStats(await getDs(), 'collection', res.body.id)).requests).to.equal(1);
  });

  it('a declined collection (phone ending 0001) fails; a number outside the corridor is 422', async () => {
    const declined = await onramp((await onrampQuote()).id, '+254722480001');
    const failed = await untilStatus(api, key, declined.body.id, ['failed', 'completed']);
    expect(failed.status).to.equal('failed');
    expect(failed.failure.code).to.equal('collection_declined');
    expect(await history(declined.body.id)).to.deep.equal(['created', 'awaiting_funds', 'failed']); // prompted, then declined
    const badNumber = await onramp((await onrampQuote()).id, '+256781904412');
    expect(badNumber.status).to.equal(400);
    expect(badNumber.body.error.code).to.equal('invalid_request');
    expect(badNumber.body.error.details[0]).to.include({ path: 'payment_method.phone_number', in: 'body' });
    const tooMuch = await api.http.post(`${BASE}/quotes`).set(writeHeaders(key)).send({
      direction: 'onramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '250000', wallet_id: walletId,
    });
    expect(tooMuch.status, 'fees on top of the maximum').to.equal(422);
    expect(tooMuch.body.error.code).to.equal('amount_out_of_range');
  });

  it('delivers to a verified external wallet too', async () => {
    const wallet = await verifiedWallet(api, key);
    const res = await onramp((await onrampQuote(wallet.id)).id);
    const done = await untilStatus(api, key, res.body.id, ['completed', 'failed']);
    expect(done.status).to.equal('completed');
    expect(done.destination.wallet_address).to.equal(wallet.address);
  });

  it('lists with every filter and pagination; a settlement is 404 for an on-ramp; confirm is 202 for a waiting off-ramp', async () => {
    const own = await makeBusiness();
    const k = own.sandboxKey;
    const customer = await createCustomer(api, k);
    const beneficiary = await kesBeneficiary(api, k);
    await fund(api, k, customer.wallet.id, '100');
    const on = await api.http.post(`${BASE}/onramps`).set(writeHeaders(k)).send({
      quote_id: (await quote(api, k, { direction: 'onramp', destination_amount: '5', wallet_id: customer.wallet.id })).id,
      payment_method: { type: 'mobile_money', phone_number: '+254722480163', mobile_network: 'safaricom' }, external_reference: 'on-1',
    });
    const ext = await verifiedWallet(api, k);
    const off = await offramp(api, k, (await quote(api, k, { direction: 'offramp', source_amount: '5', beneficiary_id: beneficiary })).id, ext.id);
    const list = (q: string) => api.http.get(`${BASE}/transactions${q}`).set(bearer(k));
    const ids = (res: { body: { data: { id: string }[] } }) => res.body.data.map((t) => t.id);
    expect(ids(await list(''))).to.deep.equal([off.body.id, on.body.id]);
    expect(ids(await list('?direction=onramp'))).to.deep.equal([on.body.id]);
    expect(ids(await list(`?beneficiary_id=${beneficiary}`))).to.deep.equal([off.body.id]);
    expect(ids(await list(`?customer_id=${customer.id}`))).to.deep.equal([on.body.id]);
    expect(ids(await list('?external_reference=on-1'))).to.deep.equal([on.body.id]);
    expect(ids(await list(`?wallet_id=${ext.id}&status=created`))).to.deep.equal([off.body.id]);
    expect(ids(await list(`?created_gte=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`))).to.deep.equal([]);
    const page1 = await list('?limit=1');
    expect(page1.body.has_more).to.equal(true);
    expect(ids(await list(`?limit=1&starting_after=${page1.body.next_cursor}`))).to.deep.equal([on.body.id]);
    expect((await list('?status=nonsense')).status).to.equal(400);
    expect((await api.http.get(`${BASE}/transactions/${on.body.id}/settlement`).set(bearer(k))).status).to.equal(404);
    const confirm = await api.http.post(`${BASE}/transactions/${off.body.id}/confirm`).set(writeHeaders(k)).send({ transaction_hash: `0x${'ab'.repeat(32)}` });
    expect(confirm.status, JSON.stringify(confirm.body)).to.equal(202);
    const onConfirm = await api.http.post(`${BASE}/transactions/${on.body.id}/confirm`).set(writeHeaders(k)).send({ transaction_hash: `0x${'ab'.repeat(32)}` });
    expect(onConfirm.status).to.equal(409);
    expect((await api.http.get(`${BASE}/transactions/${off.body.id}`).set(bearer(key))).status).to.equal(404); // another business
  });

  it('simulate failed ends a waiting off-ramp at once with the given code; a terminal one is 409', async () => {
    const ext = await verifiedWallet(api, key);
    const beneficiary = await kesBeneficiary(api, key);
    const tx = (await offramp(api, key, (await quote(api, key, { direction: 'offramp', source_amount: '5', beneficiary_id: beneficiary })).id, ext.id)).body;
    const simulate = (body: object) => api.http.post(`${BASE}/sandbox/transactions/${tx.id}/simulate`).set(writeHeaders(key)).send(body);
    const failed = await simulate({ outcome: 'failed', failure_code: 'beneficiary_bank_closed' });
    expect(failed.status, JSON.stringify(failed.body)).to.equal(200);
    expect(failed.body.status).to.equal('failed');
    expect(failed.body.failure.code).to.equal('beneficiary_bank_closed');
    expect((await simulate({ outcome: 'completed' })).status).to.equal(409);
    expect((await simulate({ outcome: 'failed', failure_code: 'Not Snake' })).status).to.equal(400);
  });

  it('live ramps answer 503 while the live chain and provider rails are not configured, before touching the quote', async () => {
    const biz = await makeBusiness();
    await (await getDs()).query(`UPDATE businesses SET live_enabled = true WHERE id = $1`, [biz.businessId]);
    const fresh = await startApi();
    try {
      const quoteId = '00000000-0000-4000-8000-000000000000';
      const off = await fresh.http.post(`${BASE}/offramps`).set(writeHeaders(biz.liveKey)).send({ quote_id: quoteId, funding_source: { wallet_id: quoteId } });
      const on = await fresh.http.post(`${BASE}/onramps`).set(writeHeaders(biz.liveKey)).send({ quote_id: quoteId, payment_method: { type: 'mobile_money', phone_number: '+254722480163', mobile_network: 'safaricom' } });
      for (const res of [off, on]) {
        expect(res.status, JSON.stringify(res.body)).to.equal(503);
        expect(res.body.error.code).to.equal('service_unavailable');
        expect(res.headers['retry-after']).to.match(/^\d+$/);
      }
    } finally {
      await fresh.close();
    }
  });
});
