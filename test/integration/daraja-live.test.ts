import { expect } from 'chai';
import { bearer, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE } from '../helpers/wallets.js';
import { expectLedgerSound, history, quote, untilStatus } from '../helpers/ramps.js';
import { until } from '../helpers/until.js';
import { CALLBACK_TOKEN, fundedLiveWallet, liveBeneficiary, liveOnramp, livePayout, startLiveRail, type LiveRail } from '../helpers/live-rail.js';

// Live on-ramps and payouts end to end on our fake Daraja (test/helpers/fake-daraja.ts: the payer's or receiver's
// last four digits pick the scenario), with the sandbox chain adapter standing in for the live chain.

const STK = '/mpesa/stkpush/v1/processrequest';

describe('live M-Pesa (Daraja) on-ramps and payouts', function () {
  this.timeout(60_000);
  let rail: LiveRail;
  before(async () => {
    rail = await startLiveRail();
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  const onramp = (phone: string) => liveOnramp(rail, phone);
  const payout = (method: 'mobile_money' | 'paybill' | 'buy_goods', details: Record<string, string>) => livePayout(rail, method, details);

  const stkFor = (phone: string) => rail.fake.log.filter((r) => r.path === STK && r.body.PhoneNumber === phone.replace('+', ''));

  it('prices live KES in whole shillings: the collected total and the payout are whole units', async () => {
    const walletId = await fundedLiveWallet(rail, '0');
    const on = await quote(rail.api, rail.key, { direction: 'onramp', destination_amount: '10', wallet_id: walletId });
    expect(on.source.amount).to.match(/\.00$/);
    expect(on.source.total_required).to.match(/\.00$/);
    const beneficiaryId = await liveBeneficiary(rail, 'mobile_money', { phone_number: '+254712340010', mobile_network: 'safaricom' });
    const off = await quote(rail.api, rail.key, { direction: 'offramp', source_amount: '13.37', beneficiary_id: beneficiaryId });
    expect(off.destination.amount).to.match(/\.00$/);
    const half = await rail.api.http.post(`${BASE}/quotes`).set(writeHeaders(rail.key)).send({ direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', destination_amount: '1000.50', beneficiary_id: beneficiaryId });
    expect(half.status).to.equal(400);
    expect(half.body.error.message).to.match(/whole number of KES/);
  });

  it('collection success: STK Push with the right password and whole amount, the callback funds it, USDC delivered', async () => {
    const id = await onramp('+254712340011');
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
    expect(tx.status).to.equal('completed');
    expect(await history(id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'processing', 'completed']);
    const [push] = stkFor('+254712340011');
    expect(push.body).to.include({ TransactionType: 'CustomerPayBillOnline', BusinessShortCode: '174379', PartyB: '174379', PartyA: '254712340011' });
    expect(push.body.Amount).to.equal(Number(tx.source.total_required));
    expect(push.body.CallBackURL).to.equal(`https://rampway.example/providers/daraja/${CALLBACK_TOKEN}/stk`);
    expect(tx.payment_source.reference).to.match(/^ws_CO_/);
  });

  it('declined (1032) and timed out (1037) collections fail with their reason', async () => {
    const [declined, timedOut] = await Promise.all([onramp('+254712340001'), onramp('+254712340037')]);
    const a = await untilStatus(rail.api, rail.key, declined, ['failed', 'completed']);
    const b = await untilStatus(rail.api, rail.key, timedOut, ['failed', 'completed']);
    expect(a.failure.code).to.equal('collection_declined');
    expect(b.failure.code).to.equal('collection_timeout');
    expect(await history(declined)).to.deep.equal(['created', 'awaiting_funds', 'failed']);
  });

  it('a lost STK callback is recovered by STK Query after DARAJA_STATUS_QUERY_AFTER_MS', async () => {
    const id = await onramp('+254712340099');
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
    expect(tx.status).to.equal('completed');
    expect(rail.fake.log.filter((r) => r.path === '/mpesa/stkpushquery/v1/query' && r.body.CheckoutRequestID === tx.payment_source.reference)).to.have.length(1);
  });

  it('a duplicated callback is stored once and applied once', async () => {
    const id = await onramp('+254712340022');
    await untilStatus(rail.api, rail.key, id, ['completed']);
    const checkout = (await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body.payment_source.reference;
    // Both deliveries were acknowledged (Daraja stops resending on 200).
    await new Promise((r) => setTimeout(r, 200));
    const acks = rail.fake.callbacks.filter((c) => c.url.endsWith('/stk') && c.status === 200).length;
    expect(acks).to.be.at.least(2);
    const rows: { n: number }[] = await (await getDs()).query(`SELECT count(*)::int AS n FROM provider_callbacks WHERE body::text LIKE '%' || $1 || '%'`, [checkout]);
    expect(rows[0].n).to.equal(1);
    expect(await history(id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'processing', 'completed']);
  });

  it('B2C payout: OriginatorConversationID is our transaction id, the result completes it', async () => {
    const { id } = await payout('mobile_money', { phone_number: '+254712340012', mobile_network: 'safaricom' });
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
    expect(tx.status).to.equal('completed');
    const sent = rail.fake.payoutsTo(id);
    expect(sent).to.have.length(1);
    expect(sent[0].path).to.equal('/mpesa/b2c/v3/paymentrequest');
    expect(sent[0].body).to.include({ OriginatorConversationID: id, CommandID: 'BusinessPayment', PartyA: '600981', PartyB: '254712340012', InitiatorName: 'rampway-api' });
    expect(sent[0].body.Amount).to.equal(Number(tx.destination.amount));
    const [row] = await (await getDs()).query(`SELECT provider_reference FROM transactions WHERE id = $1`, [id]);
    expect(row.provider_reference).to.match(/^AG_/);
  });

  it('B2B PayBill and Buy Goods payouts complete, matched by ConversationID', async () => {
    const paybill = await payout('paybill', { paybill_number: '880100', account_number: 'INV-42' });
    const till = await payout('buy_goods', { till_number: '5123456' });
    expect((await untilStatus(rail.api, rail.key, paybill.id, ['completed', 'failed', 'action_required'])).status).to.equal('completed');
    expect((await untilStatus(rail.api, rail.key, till.id, ['completed', 'failed', 'action_required'])).status).to.equal('completed');
    const [p] = rail.fake.payoutsTo(paybill.id);
    const [t] = rail.fake.payoutsTo(till.id);
    expect(p.body).to.include({ CommandID: 'BusinessPayBill', PartyB: '880100', AccountReference: 'INV-42', RecieverIdentifierType: '4' });
    expect(t.body).to.include({ CommandID: 'BusinessBuyGoods', PartyB: '5123456', RecieverIdentifierType: '2' });
  });

  it('a permanent rejection (2040) fails the payout with its code and refunds the wallet', async () => {
    const { id, walletId } = await payout('mobile_money', { phone_number: '+254712340002', mobile_network: 'safaricom' });
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
    expect(tx.status).to.equal('failed');
    expect(tx.failure.code).to.equal('invalid_receiver');
    expect(tx.failure.message).to.match(/code 2040/).and.not.to.contain('712340002');
    expect(tx.refund).to.include({ status: 'completed', amount: tx.source.total_required });
    const [{ balance: left }] = await (await getDs()).query(`SELECT balance::text FROM ledger_accounts WHERE wallet_id = $1`, [walletId]);
    expect(left).to.equal('100000000');
  });

  it('a temporary failure (HTTP 503) is retried; before sending again the job asks Transaction Status', async () => {
    const { id } = await payout('mobile_money', { phone_number: '+254712340003', mobile_network: 'safaricom' });
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    const mine = rail.fake.log.filter((r) => r.body.OriginatorConversationID === id || r.body.OriginalConversationID === id).map((r) => r.path);
    // Asked before the second request; the second's success Result is a claim, corroborated by Transaction Status
    // before the payout completes (a scheduled status check on a loaded machine may ask once more).
    const B2C = '/mpesa/b2c/v3/paymentrequest';
    const STATUS = '/mpesa/transactionstatus/v1/query';
    expect(mine.filter((p) => p === B2C), JSON.stringify(mine)).to.have.length(2);
    const second = mine.lastIndexOf(B2C);
    expect(mine.slice(1, second), JSON.stringify(mine)).to.include(STATUS);
    expect(mine.slice(second + 1), JSON.stringify(mine)).to.include(STATUS);
  });

  it('a temporary result (1: our float short) is sent again only once Transaction Status says it failed, and pays', async () => {
    const { id } = await payout('mobile_money', { phone_number: '+254712340001', mobile_network: 'safaricom' });
    expect((await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required'])).status).to.equal('completed');
    const mine = rail.fake.log.filter((r) => r.body.OriginatorConversationID === id || r.body.OriginalConversationID === id).map((r) => r.path);
    // The second request leaves only after a Transaction Status query (a status check may ask too).
    expect(mine.filter((p) => p === '/mpesa/b2c/v3/paymentrequest')).to.have.length(2);
    expect(mine.slice(0, mine.lastIndexOf('/mpesa/b2c/v3/paymentrequest'))).to.include('/mpesa/transactionstatus/v1/query');
    expect(await history(id)).to.deep.equal(['created', 'signing', 'submitting', 'awaiting_funds', 'funded', 'processing', 'completed']);
  });

  it('temporary results until PROVIDER_MAX_ATTEMPTS: action_required; retry sends once more', async () => {
    const { id } = await payout('mobile_money', { phone_number: '+254712340011', mobile_network: 'safaricom' });
    const stalled = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
    expect(stalled.status).to.equal('action_required');
    expect(stalled.failure.code).to.equal('provider_unavailable');
    expect(stalled.failure.message).to.match(/code 1\b.*after 2 attempts/);
    expect(rail.fake.payoutsTo(id)).to.have.length(2);
    const retried = await rail.api.http.post(`${BASE}/transactions/${id}/retry`).set(writeHeaders(rail.key));
    expect(retried.status, JSON.stringify(retried.body)).to.equal(202);
    await until(() => rail.fake.payoutsTo(id).length === 3, { what: 'the third payout request' });
    expect((await untilStatus(rail.api, rail.key, id, ['failed', 'action_required'])).status).to.equal('action_required');
    expect(rail.fake.payoutsTo(id)).to.have.length(3);
  });

  it('a lost payout result is recovered by Transaction Status', async () => {
    const { id } = await payout('mobile_money', { phone_number: '+254712340099', mobile_network: 'safaricom' });
    expect((await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required'])).status).to.equal('completed');
    expect(rail.fake.payoutsTo(id)).to.have.length(1);
    expect(rail.fake.log.filter((r) => r.path === '/mpesa/transactionstatus/v1/query' && r.body.OriginalConversationID === id)).to.have.length(1);
  });

  it('a callback on a wrong token is 404 and not stored; on the right one, any body is stored and acknowledged, and one we cannot read changes nothing', async () => {
    const ds = await getDs();
    const before = (await ds.query(`SELECT count(*)::int AS n FROM provider_callbacks`))[0].n;
    const body = { Body: { stkCallback: { MerchantRequestID: 'x', CheckoutRequestID: 'ws_CO_forged', ResultCode: 0, ResultDesc: 'ok' } } };
    const wrongToken = await fetch(`${rail.apiUrl}/providers/daraja/cbtok_${'x'.repeat(32)}/stk`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    expect(wrongToken.status).to.equal(404);
    expect((await ds.query(`SELECT count(*)::int AS n FROM provider_callbacks`))[0].n).to.equal(before);
    const odd = { Result: { ResultCode: 0, Extra: `odd-${Date.now()}` } };
    const wrongShape = await fetch(`${rail.apiUrl}/providers/daraja/${CALLBACK_TOKEN}/stk`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(odd) });
    expect(wrongShape.status).to.equal(200);
    expect(await wrongShape.json()).to.deep.equal({ ResultCode: 0, ResultDesc: 'Accepted' });
    const notJson = await fetch(`${rail.apiUrl}/providers/daraja/${CALLBACK_TOKEN}/result`, { method: 'POST', body: `{nope ${Date.now()}` });
    expect(notJson.status).to.equal(200);
    await until(async () => (await ds.query(`SELECT count(*)::int AS n FROM provider_callbacks WHERE received_at > now() - interval '1 minute' AND result = 'unparsed'`))[0].n >= 2, { what: 'both kept as unparsed' });
    expect((await ds.query(`SELECT count(*)::int AS n FROM provider_callbacks`))[0].n).to.equal(before + 2);
  });

  it('other live currencies have no provider: 422 unsupported_corridor, no_live_provider', async () => {
    const res = await rail.api.http.post(`${BASE}/quotes`).set(writeHeaders(rail.key)).send({ direction: 'offramp', chain: 'base', currency: 'NGN', payment_method: 'bank_transfer', source_amount: '20', beneficiary_id: '00000000-0000-4000-8000-000000000000' });
    expect(res.status).to.equal(422);
    expect(res.body.error).to.include({ code: 'unsupported_corridor' });
    expect(res.body.error.details).to.include({ reason: 'no_live_provider' });
  });

  it('a stale live rate refuses the quote with a clear error; fresh rates are cached briefly', async () => {
    const walletId = await fundedLiveWallet(rail, '0');
    rail.rates.ageMs = 600_000;
    // The cache may still hold a fresh rate from the tests before: wait it out.
    await new Promise((r) => setTimeout(r, 5_100));
    const stale = await rail.api.http.post(`${BASE}/quotes`).set(writeHeaders(rail.key)).send({ direction: 'onramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '500', wallet_id: walletId });
    expect(stale.status).to.equal(503);
    expect(stale.body.error.message).to.match(/KES rate is older than 60 s \(RATE_MAX_AGE_SECONDS\)/);
    rail.rates.ageMs = 1000;
    const asked = rail.rates.requests;
    await quote(rail.api, rail.key, { direction: 'onramp', source_amount: '500', wallet_id: walletId });
    await quote(rail.api, rail.key, { direction: 'onramp', source_amount: '600', wallet_id: walletId });
    expect(rail.rates.requests - asked).to.equal(1);
  });

  it('payment intent: collect prompts by STK Push, the callback completes it with one treasury deposit; a declined prompt lets it wait again', async () => {
    const create = await rail.api.http.post(`${BASE}/payment-intents`).set(writeHeaders(rail.key)).send({ amount: { currency: 'KES', value: '1500' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
    expect(create.status, JSON.stringify(create.body)).to.equal(201);
    const id = create.body.id;
    const collect = (phone: string) => rail.api.http.post(`${BASE}/payment-intents/${id}/collect`).set(writeHeaders(rail.key)).send({ payment_method: { type: 'mobile_money', phone_number: phone, mobile_network: 'safaricom' } });
    const get = async () => (await rail.api.http.get(`${BASE}/payment-intents/${id}`).set(bearer(rail.key))).body;
    const untilIntent = (check: (intent: Record<string, any>) => boolean) => until(async () => {
      const intent = await get();
      return check(intent) && intent;
    }, { what: 'the payment intent' });
    expect((await collect('+254712340001')).status).to.equal(202);
    const declined = await untilIntent((i) => i.last_payment_error !== null);
    expect(declined.status).to.equal('awaiting_payment');
    expect(declined.last_payment_error.code).to.equal('collection_declined');
    expect((await collect('+254712340013')).status).to.equal(202);
    expect((await untilIntent((i) => i.status === 'completed')).status).to.equal('completed');
    const deposits = await (await getDs()).query(`SELECT status, amount::text FROM treasury_deposits WHERE payment_intent_id = $1`, [id]);
    expect(deposits).to.deep.equal([{ status: 'confirmed', amount: '1500.00' }]);
    expect(stkFor('+254712340013')[0].body.Amount).to.equal(1500);
    const cents = await rail.api.http.post(`${BASE}/payment-intents`).set(writeHeaders(rail.key)).send({ amount: { currency: 'KES', value: '1500.50' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
    expect(cents.status).to.equal(400);
    expect(cents.body.error.message).to.equal('amount.value must be a whole number of KES: live M-Pesa collects whole units.');
  });

  it('every job of this file shared one OAuth token', () => {
    expect(rail.fake.tokenRequests).to.equal(1);
  });
});
