import { expect } from 'chai';
import { bearer, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE } from '../helpers/wallets.js';
import { expectLedgerSound, history, untilStatus } from '../helpers/ramps.js';
import { until } from '../helpers/until.js';
import { ANSWER_TIMEOUT_MS, LATE_ANSWER_MS, CALLBACK_TOKEN, liveOnramp, livePayout, startLiveRail, type LiveRail } from '../helpers/live-rail.js';
import { registry } from '../../shared/metrics.js';
import { checkProviderJob } from '../../workers/providers/check-provider.job.js';

// Corroboration and late successes (CONTRACT §14 "Provider truth", issue 22 defects 5 and 6) on our Daraja stand-in:
// a callback alone never delivers USDC, credits a deposit or refunds; the provider's own query decides, at once.
// Status checks are a minute apart here, so whatever happens sooner is the corroboration's doing.

const B2C = '/mpesa/b2c/v3/paymentrequest';
const STATUS = '/mpesa/transactionstatus/v1/query';
const STK = '/mpesa/stkpush/v1/processrequest';
const STK_QUERY = '/mpesa/stkpushquery/v1/query';

async function contradictions(): Promise<number> {
  const metric = await registry.getSingleMetric('rampway_provider_callbacks_contradicted_total')!.get();
  return metric.values.reduce((sum, v) => sum + v.value, 0);
}

function callbacks(rail: LiveRail) {
  const post = (kind: string, body: unknown) =>
    fetch(`${rail.apiUrl}/providers/daraja/${CALLBACK_TOKEN}/${kind}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  /** Posts a callback and waits until the providers pool has applied it; answers the stored result. */
  return async (kind: string, body: unknown, checkout: string): Promise<string> => {
    const ds = await getDs();
    const before: { id: string }[] = await ds.query(`SELECT id FROM provider_callbacks`);
    expect((await post(kind, body)).status).to.equal(200);
    const known = new Set(before.map((r) => r.id));
    return until(async () => {
      const rows: { id: string; result: string | null }[] = await ds.query(
        `SELECT id, result FROM provider_callbacks WHERE processed_at IS NOT NULL AND (body->'Body'->'stkCallback'->>'CheckoutRequestID' = $1 OR body->'Result'->>'OriginatorConversationID' = $1)`, [checkout],
      );
      return rows.find((r) => !known.has(r.id))?.result ?? false;
    }, { what: 'the callback applied' });
  };
}

describe('live M-Pesa: callbacks are corroborated before money moves', function () {
  this.timeout(60_000);
  let rail: LiveRail;
  let postAndApply: ReturnType<typeof callbacks>;
  before(async () => {
    rail = await startLiveRail({ env: { DARAJA_STATUS_QUERY_AFTER_MS: '60000' } });
    postAndApply = callbacks(rail);
  });
  after(() => rail?.close());
  afterEach(async () => {
    rail.fake.callbackDelayMs = 30;
    await expectLedgerSound();
  });

  const get = async (id: string) => (await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body;
  const checkoutOf = (id: string) => until(async () => (await get(id)).payment_source.reference ?? false, { what: 'the prompt' });

  it('an STK success is corroborated by STK Query on its CheckoutRequestID as soon as it is stored, before USDC is delivered', async () => {
    const id = await liveOnramp(rail, '+254712370011');
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
    expect(tx.status).to.equal('completed');
    const checkout = tx.payment_source.reference;
    const queries = rail.fake.log.filter((r) => r.path === STK_QUERY && r.body.CheckoutRequestID === checkout);
    expect(queries).to.have.length(1);
    expect(tx.provider_reference).to.equal(rail.fake.stkCallbackFor(checkout)!.Body.stkCallback.CallbackMetadata.Item.find((i: { Name: string }) => i.Name === 'MpesaReceiptNumber').Value);
  });

  it('a forged STK success for a prompt M-Pesa reports declined changes nothing, and is counted', async () => {
    rail.fake.callbackDelayMs = 2000; // M-Pesa's own (declined) result comes later
    const id = await liveOnramp(rail, '+254712370001');
    const checkout = await checkoutOf(id);
    const counted = await contradictions();
    expect(await postAndApply('stk', rail.fake.forgedStkSuccess(checkout), checkout)).to.equal('contradicted');
    expect(await contradictions()).to.equal(counted + 1);
    expect((await get(id)).status).to.equal('awaiting_funds');
    const tx = await untilStatus(rail.api, rail.key, id, ['failed', 'completed']);
    expect(tx.status).to.equal('failed');
    expect(tx.failure.code).to.equal('collection_declined');
    expect(await history(id)).to.deep.equal(['created', 'awaiting_funds', 'failed']);
  });

  it('an STK success whose Amount or PhoneNumber is not the request\'s changes nothing; M-Pesa\'s own success then funds it', async () => {
    rail.fake.callbackDelayMs = 2000;
    const id = await liveOnramp(rail, '+254712370012');
    const checkout = await checkoutOf(id);
    const counted = await contradictions();
    const asked = () => rail.fake.log.filter((r) => r.path === STK_QUERY && r.body.CheckoutRequestID === checkout).length;
    expect(await postAndApply('stk', rail.fake.forgedStkSuccess(checkout, { amount: 1 }), checkout)).to.equal('contradicted');
    expect(await postAndApply('stk', rail.fake.forgedStkSuccess(checkout, { phone: '254712379999' }), checkout)).to.equal('contradicted');
    expect(await contradictions()).to.equal(counted + 2);
    expect(asked()).to.equal(0); // a mismatch is refused before M-Pesa is asked
    expect((await get(id)).status).to.equal('awaiting_funds');
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed']);
    expect(tx.status).to.equal('completed');
    expect(tx.provider_reference).to.equal(rail.fake.stkCallbackFor(checkout)!.Body.stkCallback.CallbackMetadata.Item.find((i: { Name: string }) => i.Name === 'MpesaReceiptNumber').Value);
  });

  /** A decline-shaped STK callback (1032, cancelled) for a prompt, whatever M-Pesa's record of it says. */
  const forgedDecline = (checkout: string) => {
    const body = rail.fake.stkCallbackFor(checkout)!;
    Object.assign(body.Body.stkCallback, { ResultCode: 1032, ResultDesc: 'Request cancelled by user' });
    delete body.Body.stkCallback.CallbackMetadata;
    return body;
  };

  it('a forged decline for a prompt the payer approved is contradicted by STK Query: the on-ramp is never failed, and is delivered', async () => {
    rail.fake.callbackDelayMs = 2000; // M-Pesa's own (paid) result comes later
    const id = await liveOnramp(rail, '+254712370013');
    const checkout = await checkoutOf(id);
    const counted = await contradictions();
    expect(await postAndApply('stk', forgedDecline(checkout), checkout)).to.equal('contradicted');
    expect(await contradictions()).to.equal(counted + 1);
    expect(rail.fake.log.filter((r) => r.path === STK_QUERY && r.body.CheckoutRequestID === checkout)).to.have.length(1);
    expect((await get(id)).status).to.equal('awaiting_funds');
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed']);
    expect(tx.status).to.equal('completed');
    expect(await history(id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'processing', 'completed']);
  });

  it('a forged decline for an intent\'s approved prompt leaves the intent processing; M-Pesa\'s success completes it', async () => {
    rail.fake.callbackDelayMs = 2000;
    const create = await rail.api.http.post(`${BASE}/payment-intents`).set(writeHeaders(rail.key)).send({ amount: { currency: 'KES', value: '1500' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
    expect(create.status, JSON.stringify(create.body)).to.equal(201);
    const id = create.body.id;
    const collect = await rail.api.http.post(`${BASE}/payment-intents/${id}/collect`).set(writeHeaders(rail.key))
      .send({ payment_method: { type: 'mobile_money', phone_number: '+254712390013', mobile_network: 'safaricom' } });
    expect(collect.status).to.equal(202);
    const checkout: string = await until(async () => (await (await getDs()).query(`SELECT provider_reference FROM payment_intents WHERE id = $1`, [id]))[0]?.provider_reference ?? false, { what: 'the prompt' });
    const counted = await contradictions();
    expect(await postAndApply('stk', forgedDecline(checkout), checkout)).to.equal('contradicted');
    expect(await contradictions()).to.equal(counted + 1);
    const intent = (await rail.api.http.get(`${BASE}/payment-intents/${id}`).set(bearer(rail.key))).body;
    expect(intent.status).to.equal('processing');
    expect(intent.last_payment_error).to.equal(null);
    const done = await until(async () => {
      const body = (await rail.api.http.get(`${BASE}/payment-intents/${id}`).set(bearer(rail.key))).body;
      return body.status === 'completed' && body;
    }, { what: 'the intent paid' });
    expect(done.last_payment_error).to.equal(null);
  });

  it('a payout\'s permanent failure (2040) is corroborated by Transaction Status before the refund', async () => {
    const { id } = await livePayout(rail, 'mobile_money', { phone_number: '+254712370002', mobile_network: 'safaricom' });
    const tx = await untilStatus(rail.api, rail.key, id, ['failed', 'completed', 'action_required']);
    expect(tx.status).to.equal('failed');
    expect(tx.failure.code).to.equal('invalid_receiver');
    expect(tx.refund.status).to.equal('completed');
    expect(rail.fake.log.filter((r) => r.body.OriginatorConversationID === id || r.body.OriginalConversationID === id).map((r) => r.path)).to.deep.equal([B2C, STATUS]);
  });

  it('a forged permanent failure for a payout M-Pesa completed is contradicted by Transaction Status: completed, never refunded', async () => {
    const { id } = await livePayout(rail, 'mobile_money', { phone_number: '+254712370099', mobile_network: 'safaricom' }); // its result is lost
    await untilStatus(rail.api, rail.key, id, ['processing']);
    const forged = rail.fake.resultFor(id)!;
    Object.assign(forged.Result, { ResultCode: 2040, ResultDesc: 'Credit Party customer type can\'t be supported by the service.' });
    delete forged.Result.ResultParameters;
    const counted = await contradictions();
    expect(await postAndApply('result', forged, id)).to.equal('corroborating');
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed']);
    expect(tx.status).to.equal('completed');
    expect(tx.refund).to.equal(null);
    expect(rail.fake.executions.get(id)).to.equal(1);
    expect(await contradictions()).to.equal(counted + 1);
  });
});

describe('live M-Pesa: a success is never lost', function () {
  this.timeout(60_000);
  let rail: LiveRail;
  before(async () => {
    rail = await startLiveRail({ env: { DARAJA_STATUS_QUERY_AFTER_MS: '60000', DARAJA_REQUEST_TIMEOUT_MS: String(ANSWER_TIMEOUT_MS), PROVIDER_RETRY_BASE_MS: '500' } });
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  it('an on-ramp failed on a collection timeout (1037) is funded and delivered when M-Pesa reports it paid after all', async () => {
    const id = await liveOnramp(rail, '+254712380037');
    const failed = await untilStatus(rail.api, rail.key, id, ['failed', 'completed']);
    expect(failed.failure.code).to.equal('collection_timeout');
    await rail.fake.payLate(failed.payment_source.reference);
    const tx = await untilStatus(rail.api, rail.key, id, ['completed']);
    expect(await history(id)).to.deep.equal(['created', 'awaiting_funds', 'failed', 'funded', 'processing', 'completed']);
    expect(tx.failure).to.equal(null);
    expect(tx.provider_reference).to.match(/^[A-Z0-9]{10}$/);
  });

  it('a payment intent whose prompt timed out records a late treasury deposit when the payer pays after all; the intent stays as it was', async () => {
    const create = await rail.api.http.post(`${BASE}/payment-intents`).set(writeHeaders(rail.key)).send({ amount: { currency: 'KES', value: '1500' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
    expect(create.status, JSON.stringify(create.body)).to.equal(201);
    const id = create.body.id;
    const collect = await rail.api.http.post(`${BASE}/payment-intents/${id}/collect`).set(writeHeaders(rail.key))
      .send({ payment_method: { type: 'mobile_money', phone_number: '+254712390037', mobile_network: 'safaricom' } });
    expect(collect.status).to.equal(202);
    const given = await until(async () => {
      const intent = (await rail.api.http.get(`${BASE}/payment-intents/${id}`).set(bearer(rail.key))).body;
      return intent.last_payment_error !== null && intent;
    }, { what: 'the prompt timing out' });
    expect(given.status).to.equal('awaiting_payment');
    expect(given.last_payment_error.code).to.equal('collection_timeout');
    const [{ checkout }] = await (await getDs()).query(`SELECT provider_reference AS checkout FROM payment_intents WHERE id = $1`, [id]);
    await rail.fake.payLate(checkout);
    const deposits = await until(async () => {
      const rows = await (await getDs()).query(`SELECT status, late_payment, amount::text, receipt FROM treasury_deposits WHERE payment_intent_id = $1`, [id]);
      return rows.length > 0 && rows[0].status === 'confirmed' && rows;
    }, { what: 'the late deposit' });
    expect(deposits).to.have.length(1);
    expect(deposits[0]).to.deep.include({ late_payment: true, amount: '1500.00' });
    expect(deposits[0].receipt).to.match(/^[A-Z0-9]{10}$/);
    expect((await rail.api.http.get(`${BASE}/payment-intents/${id}`).set(bearer(rail.key))).body.status).to.equal('awaiting_payment');
  });

  it('a prompt still out when its intent moved on (paid another way) is asked about until answered: its payment, callback lost, is a late deposit', async () => {
    const create = await rail.api.http.post(`${BASE}/payment-intents`).set(writeHeaders(rail.key)).send({ amount: { currency: 'KES', value: '1500' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
    expect(create.status, JSON.stringify(create.body)).to.equal(201);
    const id = create.body.id;
    rail.fake.loses = (url) => url.endsWith('/stk');
    try {
      const collect = await rail.api.http.post(`${BASE}/payment-intents/${id}/collect`).set(writeHeaders(rail.key))
        .send({ payment_method: { type: 'mobile_money', phone_number: '+254712390044', mobile_network: 'safaricom' } });
      expect(collect.status).to.equal(202);
      const ds = await getDs();
      await until(async () => (await ds.query(`SELECT 1 FROM provider_requests WHERE reference = $1 AND provider_reference IS NOT NULL`, [`${id}-1`])).length > 0, { what: 'the prompt accepted' });
      // The intent moves on without this prompt's answer (here: it expires); the payer approved the prompt meanwhile.
      await ds.query(`UPDATE payment_intents SET status = 'expired', updated_at = now() WHERE id = $1`, [id]);
      await checkProviderJob.process({ data: { intentId: id, attempt: 1, round: 1 } } as never, rail.pools.deps);
      const deposits = await ds.query(`SELECT status, late_payment FROM treasury_deposits WHERE payment_intent_id = $1`, [id]);
      expect(deposits).to.deep.equal([{ status: 'confirmed', late_payment: true }]);
    } finally {
      rail.fake.loses = null;
    }
  });

  it('a prompt whose STK Push answer was lost learns its CheckoutRequestID from its callback: the retry asks, never prompts again', async () => {
    rail.fake.holdMs = LATE_ANSWER_MS;
    try {
      const id = await liveOnramp(rail, '+254712380066');
      const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
      expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
      const prompts = rail.fake.log.filter((r) => r.path === STK && r.body.PhoneNumber === '254712380066');
      expect(prompts).to.have.length(1);
      // The retry's STK Query funded it; the receipt comes with the callback, applied once the on-ramp was prompted.
      const receipt = await until(async () => (await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body.provider_reference, { what: 'the receipt' });
      expect(receipt).to.equal(rail.fake.stkCallbackFor(tx.payment_source.reference)!.Body.stkCallback.CallbackMetadata.Item.find((i: { Name: string }) => i.Name === 'MpesaReceiptNumber').Value);
    } finally {
      rail.fake.holdMs = 0;
    }
  });
});
