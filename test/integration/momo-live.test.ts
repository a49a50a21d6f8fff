import { expect } from 'chai';
import { erc20Abi, getAddress, parseEther } from 'viem';
import { bearer, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE } from '../helpers/wallets.js';
import { expectLedgerSound, history, offramp, quote, untilStatus } from '../helpers/ramps.js';
import { mintUsdc } from '../helpers/chain.js';
import { until } from '../helpers/until.js';
import { fundedLiveWallet, liveExternalAccount, MOMO_CALLBACK_TOKEN, startLiveChainRail, transferUsdcFrom, type LiveChainRail } from '../helpers/live-rail.js';
import { momoBeneficiary, momoOnramp, ugPhone } from '../helpers/momo-rail.js';
import { MOMO_CREDENTIALS, type FakeMomo } from '../helpers/fake-momo.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';

// Live UGX on-ramps, off-ramps and payment-intent collections end to end on Anvil playing base, with MTN MoMo played
// by our stand-in (test/helpers/fake-momo.ts, written from MTN's documentation) and M-Pesa Daraja still serving KES.

describe('live MTN MoMo (UGX) end to end on Anvil', function () {
  this.timeout(120_000);
  let rail: LiveChainRail;
  let momo: FakeMomo;
  before(async () => {
    rail = await startLiveChainRail({ momo: true, env: { MOMO_STATUS_QUERY_AFTER_MS: '400', CONFIRMATIONS_BASE: '1', CHAIN_RECONCILE_MS: '3600000', QUOTE_WAIT_MS: '15000', REDIS_COMMAND_TIMEOUT_MS: '5000' } });
    momo = rail.momo!;
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  const mine = () => rail.anvil.publicClient.request({ method: 'anvil_mine' as never, params: ['0x1'] as never });
  const usdcOf = (address: string) => rail.anvil.publicClient.readContract({ address: rail.token, abi: erc20Abi, functionName: 'balanceOf', args: [getAddress(address)] });

  it('GET /corridors: UGX mobile money is live on mtn only; KES stays on Daraja', async () => {
    const { data } = (await rail.api.http.get(`${BASE}/corridors`).set(bearer(rail.key))).body as { data: Record<string, any>[] };
    const ugx = data.find((c) => c.currency === 'UGX' && c.payment_method === 'mobile_money')!;
    expect(ugx).to.include({ live_available: true, currency_scale: 0 });
    expect(ugx.live_networks).to.deep.equal(['mtn']);
    expect(ugx.directions).to.deep.equal(['offramp', 'onramp']);
    expect(data.find((c) => c.currency === 'KES' && c.payment_method === 'mobile_money')!.live_networks).to.deep.equal(['safaricom', 'airtel']);
    expect(data.find((c) => c.currency === 'RWF' && c.payment_method === 'mobile_money')).to.include({ live_available: false });
  });

  it('GET /onramps/readiness lists both providers\' checks and the UGX currency', async () => {
    const res = await rail.api.http.get(`${BASE}/onramps/readiness`).set(bearer(rail.key));
    expect(res.status).to.equal(200);
    expect(res.body.providers).to.deep.equal(['mpesa_daraja', 'mtn_momo']);
    expect(res.body.currencies).to.deep.equal(['KES', 'UGX']);
    expect(Object.keys(res.body.checks)).to.include.members(['daraja_credentials', 'callback_url', 'momo_credentials', 'momo_callback_url', 'rate_source']);
    expect(res.body.checks.momo_credentials).to.deep.equal({ ok: true, message: null });
    expect(res.body.checks.momo_callback_url).to.deep.equal({ ok: true, message: null });
  });

  it('other networks of UGX answer 422 no_live_provider, at the quote (off-ramp) and at the on-ramp', async () => {
    const airtel = await momoBeneficiary(rail, ugPhone('1234'), 'airtel');
    const q = await rail.api.http.post(`${BASE}/quotes`).set(writeHeaders(rail.key)).send({ direction: 'offramp', chain: 'base', currency: 'UGX', payment_method: 'mobile_money', source_amount: '20', beneficiary_id: airtel });
    expect(q.status).to.equal(422);
    expect(q.body.error.code).to.equal('unsupported_corridor');
    expect(q.body.error.details).to.include({ reason: 'no_live_provider', mobile_network: 'airtel' });
    const walletId = await fundedLiveWallet(rail, '0');
    const on = await quote(rail.api, rail.key, { direction: 'onramp', currency: 'UGX', source_amount: '15000', wallet_id: walletId });
    const res = await rail.api.http.post(`${BASE}/onramps`).set(writeHeaders(rail.key)).send({ quote_id: on.id, payment_method: { type: 'mobile_money', phone_number: ugPhone('1234'), mobile_network: 'airtel' } });
    expect(res.status).to.equal(422);
    expect(res.body.error.details).to.include({ reason: 'no_live_provider' });
    // Refused before the quote was consumed: it still starts an on-ramp on mtn.
    const ok = await rail.api.http.post(`${BASE}/onramps`).set(writeHeaders(rail.key)).send({ quote_id: on.id, payment_method: { type: 'mobile_money', phone_number: ugPhone('1235'), mobile_network: 'mtn' } });
    expect(ok.status, JSON.stringify(ok.body)).to.equal(201);
    await untilStatus(rail.api, rail.key, ok.body.id, ['completed', 'failed']);
  });

  it('on-ramp: requesttopay in MTN\'s shape, the corroborated callback funds it, the hot wallet delivers on chain', async () => {
    const id = await momoOnramp(rail, ugPhone('1001'));
    const done = await until(async () => {
      await mine();
      const tx = (await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body;
      return ['completed', 'failed', 'action_required'].includes(tx.status) && tx;
    }, { what: 'the on-ramp completing', timeoutMs: 30_000, everyMs: 150 });
    expect(done.status, JSON.stringify(done.failure)).to.equal('completed');
    expect(await history(id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'processing', 'completed']);
    const [sent] = momo.requestsFor(id);
    expect(sent).to.include({ path: '/collection/v1_0/requesttopay', referenceId: id, targetEnvironment: 'sandbox', callbackUrl: `https://rampway.example/providers/momo/${MOMO_CALLBACK_TOKEN}/collection` });
    expect(sent.body).to.deep.equal({ amount: done.source.total_required, currency: 'UGX', externalId: id, payer: { partyIdType: 'MSISDN', partyId: '256772341001' }, payerMessage: 'Rampway payment', payeeNote: id });
    expect(done.source.total_required).to.match(/^\d+$/);
    // The callback was corroborated by the status GET before anything moved.
    expect(momo.log.some((r) => r.method === 'GET' && r.path === `/collection/v1_0/requesttopay/${id}`)).to.equal(true);
    expect(done.provider_reference).to.equal(momo.statusOf(id)!.financialTransactionId);
    expect(await usdcOf(done.destination.wallet_address)).to.equal(toMinor(done.destination.amount, USDC_SCALE));
  });

  it('on-ramp: a collection MTN FAILED for any reason ends its prompt (collection_failed), is never sent again, and a success MTN reports afterwards funds it', async () => {
    const phone = ugPhone('1011');
    momo.answers.set(phone.replace(/\D/g, ''), ['INTERNAL_PROCESSING_ERROR']);
    const id = await momoOnramp(rail, phone);
    const failed = await untilStatus(rail.api, rail.key, id, ['failed']);
    expect(failed.failure.code).to.equal('collection_failed');
    expect(failed.failure.message).to.match(/INTERNAL_PROCESSING_ERROR/);
    // The collect job run again (a retry, a sweep) sends nothing: the payer is prompted again only by a new collection.
    const collect = (await rail.pools.deps.queues.providers.getJobs(['completed'])).find((j) => j.name === 'collection.request' && (j.data as { transactionId?: string }).transactionId === id);
    expect(collect, 'the on-ramp\'s collect job').to.not.equal(undefined);
    await collect!.retry('completed');
    await until(async () => (await collect!.getState()) === 'completed' && (await rail.pools.deps.queues.providers.getJob(collect!.id!))?.finishedOn! > collect!.finishedOn!, { what: 'the collect job run again' });
    expect(momo.requestsFor(id)).to.have.length(1);
    // MTN changes its mind: the corroborated success funds the on-ramp once, and it completes.
    await momo.payLate(momo.requestsFor(id)[0].referenceId!);
    const done = await until(async () => {
      await mine();
      const tx = (await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body;
      return tx.status === 'completed' && tx;
    }, { what: 'the late-paid on-ramp completing', timeoutMs: 30_000, everyMs: 150 });
    expect(await history(id)).to.deep.equal(['created', 'awaiting_funds', 'failed', 'funded', 'processing', 'completed']);
    expect(done.provider_reference).to.equal(momo.statusOf(id)!.financialTransactionId);
  });

  it('off-ramp: transfer in MTN\'s shape, paid once, provider_reference is the financialTransactionId', async () => {
    // An external wallet pays the deposit address on chain; confirmed, the payout goes to MTN.
    const { account, wallet } = await liveExternalAccount(rail);
    const beneficiaryId = await momoBeneficiary(rail, ugPhone('1002'));
    const q = await quote(rail.api, rail.key, { direction: 'offramp', currency: 'UGX', source_amount: '20', beneficiary_id: beneficiaryId });
    const created = await offramp(rail.api, rail.key, q.id, wallet.id);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const id = created.body.id;
    const total = toMinor(created.body.settlement.total_required, USDC_SCALE);
    await mintUsdc(rail.anvil, rail.token, account.address, total);
    await rail.anvil.publicClient.request({ method: 'anvil_setBalance' as never, params: [account.address, `0x${parseEther('1').toString(16)}`] as never });
    await transferUsdcFrom(rail, account.key, created.body.settlement.to_address, total);
    const done = await until(async () => {
      await mine();
      const tx = (await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body;
      return ['completed', 'failed', 'action_required'].includes(tx.status) && tx;
    }, { what: 'the off-ramp completing', timeoutMs: 30_000, everyMs: 150 });
    expect(done.status, JSON.stringify(done.failure)).to.equal('completed');
    const [sent] = momo.requestsFor(id);
    expect(sent).to.include({ path: '/disbursement/v1_0/transfer', referenceId: id, callbackUrl: `https://rampway.example/providers/momo/${MOMO_CALLBACK_TOKEN}/payout` });
    expect(sent.body).to.include({ amount: done.destination.amount, currency: 'UGX', externalId: id });
    expect(sent.body.payee).to.deep.equal({ partyIdType: 'MSISDN', partyId: '256772341002' });
    expect(done.provider_reference).to.equal(momo.statusOf(id)!.financialTransactionId);
    expect(momo.executions.get(id)).to.equal(1);
  });

  it('quotes round UGX to whole shillings: the payout down, the collection up', async () => {
    const walletId = await fundedLiveWallet(rail, '0');
    const on = await quote(rail.api, rail.key, { direction: 'onramp', currency: 'UGX', destination_amount: '10', wallet_id: walletId });
    // 10 USDC at 129.35 is 1293.5 UGX: collected as at least 1294.
    expect(on.source.amount).to.match(/^\d+$/);
    expect(Number(on.source.amount)).to.be.at.least(1294);
    const beneficiaryId = await momoBeneficiary(rail, ugPhone('1003'));
    const off = await quote(rail.api, rail.key, { direction: 'offramp', currency: 'UGX', source_amount: '13.37', beneficiary_id: beneficiaryId });
    expect(off.destination.amount).to.match(/^\d+$/);
    const half = await rail.api.http.post(`${BASE}/quotes`).set(writeHeaders(rail.key)).send({ direction: 'offramp', chain: 'base', currency: 'UGX', payment_method: 'mobile_money', destination_amount: '1000.5', beneficiary_id: beneficiaryId });
    expect(half.status).to.equal(400);
  });

  it('payment intent: collect prompts by requesttopay under a UUID of its own; the callback completes it with one treasury deposit', async () => {
    const create = await rail.api.http.post(`${BASE}/payment-intents`).set(writeHeaders(rail.key)).send({ amount: { currency: 'UGX', value: '20000' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
    expect(create.status, JSON.stringify(create.body)).to.equal(201);
    const id = create.body.id;
    const collect = (phone: string, network = 'mtn') => rail.api.http.post(`${BASE}/payment-intents/${id}/collect`).set(writeHeaders(rail.key)).send({ payment_method: { type: 'mobile_money', phone_number: phone, mobile_network: network } });
    const untilIntent = (check: (intent: Record<string, any>) => boolean) => until(async () => {
      const intent = (await rail.api.http.get(`${BASE}/payment-intents/${id}`).set(bearer(rail.key))).body;
      return check(intent) && intent;
    }, { what: 'the payment intent', timeoutMs: 20_000 });
    const airtel = await collect(ugPhone('1004'), 'airtel');
    expect(airtel.status).to.equal(422);
    expect(airtel.body.error.details).to.include({ reason: 'no_live_provider' });
    expect((await collect(ugPhone('0001'))).status).to.equal(202);
    const declined = await untilIntent((i) => i.last_payment_error !== null);
    expect(declined.status).to.equal('awaiting_payment');
    expect(declined.last_payment_error.code).to.equal('collection_declined');
    expect((await collect(ugPhone('1004'))).status).to.equal(202);
    expect((await untilIntent((i) => i.status === 'completed')).status).to.equal('completed');
    const [request] = momo.requestsFor(`${id}-2`);
    expect(request.referenceId).to.match(/^[0-9a-f-]{36}$/).and.not.equal(id);
    expect(request.body).to.include({ amount: '20000', currency: 'UGX' });
    const deposits = await (await getDs()).query(`SELECT status, amount::text, receipt FROM treasury_deposits WHERE payment_intent_id = $1`, [id]);
    expect(deposits).to.deep.equal([{ status: 'confirmed', amount: '20000', receipt: momo.statusOf(request.referenceId!)!.financialTransactionId }]);
  });

  it('every job of this file shared one token per MoMo product, asked with the product\'s keys', () => {
    expect(momo.tokenRequests).to.deep.equal({ collection: 1, disbursement: 1 });
    expect(MOMO_CREDENTIALS.collection.subscriptionKey).not.to.equal(MOMO_CREDENTIALS.disbursement.subscriptionKey);
  });
});
