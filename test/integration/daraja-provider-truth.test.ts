import { expect } from 'chai';
import { bearer, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE } from '../helpers/wallets.js';
import { expectLedgerSound, history, untilStatus } from '../helpers/ramps.js';
import { until } from '../helpers/until.js';
import { ANSWER_TIMEOUT_MS, LATE_ANSWER_MS, CALLBACK_TOKEN, liveOnramp, livePayout, startLiveRail, type LiveRail } from '../helpers/live-rail.js';
import { checkProviderJob } from '../../workers/providers/check-provider.job.js';
import { MAX_CHECK_ROUNDS } from '../../shared/domain/provider-results.js';
import { forgetDarajaTokens } from '../../shared/providers/daraja/daraja-client.js';

// Provider truth (CONTRACT §14) on our Daraja stand-in, which speaks Safaricom's published shapes
// (test/helpers/fake-daraja.ts): callbacks read as Daraja sends them, "not found" lets a payout be sent again, an
// ambiguous answer is always followed by a status check before anything is sent again.

const B2C = '/mpesa/b2c/v3/paymentrequest';
const STATUS = '/mpesa/transactionstatus/v1/query';

describe('live M-Pesa: provider truth', function () {
  this.timeout(60_000);
  let rail: LiveRail;
  before(async () => {
    rail = await startLiveRail();
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  const pathsFor = (id: string) => rail.fake.log.filter((r) => r.body.OriginatorConversationID === id || r.body.OriginalConversationID === id).map((r) => r.path);

  it('an STK success in Safaricom\'s shape (Name/Value items, Balance without Value) is acknowledged, funds the on-ramp, and its MpesaReceiptNumber is the provider_reference', async () => {
    const id = await liveOnramp(rail, '+254712342011');
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
    expect(tx.status).to.equal('completed');
    const checkout = tx.payment_source.reference;
    const sent = rail.fake.stkCallbackFor(checkout)!;
    const items: { Name: string; Value?: unknown }[] = sent.Body.stkCallback.CallbackMetadata.Item;
    expect(items.find((i) => i.Name === 'Balance')).to.deep.equal({ Name: 'Balance' });
    const [row] = await (await getDs()).query(`SELECT result FROM provider_callbacks WHERE body->'Body'->'stkCallback'->>'CheckoutRequestID' = $1`, [checkout]);
    expect(row.result).to.equal('funded');
    expect(rail.fake.callbacks.filter((c) => c.url.endsWith('/stk')).every((c) => c.status === 200 && (c.body as { ResultCode: number }).ResultCode === 0)).to.equal(true);
    expect(tx.provider_reference).to.equal(items.find((i) => i.Name === 'MpesaReceiptNumber')!.Value);
    expect(tx.provider_reference).to.match(/^[A-Z0-9]{10}$/);
  });

  it('a B2C request answered HTTP 503: Transaction Status says 2032, so the payout is sent again with the same OriginatorConversationID and pays once', async () => {
    const { id } = await livePayout(rail, 'mobile_money', { phone_number: '+254712350003', mobile_network: 'safaricom' });
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    // Asked before the second request; its success Result corroborated by Transaction Status before the payout
    // completes (a scheduled status check on a loaded machine may ask once more).
    const paths = pathsFor(id);
    expect(paths.filter((p) => p === B2C), JSON.stringify(paths)).to.have.length(2);
    expect(paths.slice(1, paths.lastIndexOf(B2C)), JSON.stringify(paths)).to.include(STATUS);
    expect(paths.slice(paths.lastIndexOf(B2C) + 1), JSON.stringify(paths)).to.include(STATUS);
    expect(rail.fake.payoutsTo(id).map((r) => r.body.OriginatorConversationID)).to.deep.equal([id, id]);
    expect(rail.fake.executions.get(id)).to.equal(1);
    expect(rail.fake.callbacks.some((c) => c.url.endsWith('/status'))).to.equal(true);
    expect(tx.provider_reference).to.equal(rail.fake.resultFor(id)!.Result.TransactionID);
  });

  it('retry of a payout stalled on an unanswered request asks Transaction Status, and sends once it says 2032', async () => {
    const origin = rail.fake.callbackOrigin;
    rail.fake.callbackOrigin = 'http://127.0.0.1:9'; // every result is lost for now
    const { id } = await livePayout(rail, 'mobile_money', { phone_number: '+254712360003', mobile_network: 'safaricom' });
    const stalled = await until(async () => {
      const t = (await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body;
      return ['completed', 'failed', 'action_required'].includes(t.status) && t;
    }, { timeoutMs: 20_000, what: 'the payout giving up on M-Pesa' });
    expect(stalled.status).to.equal('action_required');
    expect(rail.fake.payoutsTo(id)).to.have.length(1);
    rail.fake.callbackOrigin = origin;
    expect((await rail.api.http.post(`${BASE}/transactions/${id}/retry`).set(writeHeaders(rail.key))).status).to.equal(202);
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed']);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    expect(rail.fake.payoutsTo(id)).to.have.length(2);
    expect(rail.fake.executions.get(id)).to.equal(1);
  });

  const STK = '/mpesa/stkpush/v1/processrequest';
  for (const [suffix, answer] of [['0050', 'HTTP 500 with Daraja\'s error body'], ['0051', 'a bare HTTP 503']]) {
    it(`an STK Push answered ${answer} is no decline: the prompt may be live, so it is never sent again and the payer's success funds the on-ramp`, async () => {
      const phone = `+25471236${suffix}`;
      const id = await liveOnramp(rail, phone);
      const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
      expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
      expect(rail.fake.log.filter((r) => r.path === STK && r.body.PhoneNumber === phone.slice(1))).to.have.length(1);
      expect(await history(id)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'processing', 'completed']);
      // Funded only once STK Query on the CheckoutRequestID its callback taught said paid.
      expect(rail.fake.log.some((r) => r.path === '/mpesa/stkpushquery/v1/query' && r.body.CheckoutRequestID === tx.payment_source.reference)).to.equal(true);
    });
  }

  it('a prompt M-Pesa never named to us (its STK Push answer and its callback both lost) that the payer paid is found by Pull Transactions and funds the on-ramp, with its receipt', async () => {
    const phone = '+254712360097';
    const id = await liveOnramp(rail, phone);
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    expect(rail.fake.log.filter((r) => r.path === STK && r.body.PhoneNumber === phone.slice(1))).to.have.length(1);
    const pulls = rail.fake.log.filter((r) => r.path === '/pulltransactions/v1/query');
    expect(pulls.length).to.be.at.least(1);
    const [row]: { receipt: string; provider_reference: string }[] = await (await getDs()).query(`SELECT receipt, provider_reference FROM transactions WHERE id = $1`, [id]);
    expect(row.receipt).to.match(/^[A-Z0-9]{10}$/);
    expect(row.provider_reference).to.equal(`pull-${row.receipt}`);
    // The lost callback turns up after all: matched to the prompt by its receipt, corroborated, and credits nothing twice.
    const [checkout] = rail.fake.checkoutsFor(phone.slice(1));
    const late = await fetch(`${rail.apiUrl}/providers/daraja/${CALLBACK_TOKEN}/stk`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(rail.fake.stkCallbackFor(checkout)) });
    expect(late.status).to.equal(200);
    const ds = await getDs();
    // Its corroboration (STK Query) is asked again on a short delay while M-Pesa lags: under the whole suite's load that
    // has taken more than 10 s, so the wait is longer, and names what the callback row held when it gave up.
    let seen: unknown;
    const applied = await until(async () => {
      const rows: { result: string | null; processed_at: Date | null }[] = await ds.query(`SELECT result, processed_at FROM provider_callbacks WHERE body->'Body'->'stkCallback'->>'CheckoutRequestID' = $1`, [checkout]);
      seen = rows;
      return (rows[0]?.processed_at && rows[0].result) ?? false;
    }, { what: 'the late callback applied', timeoutMs: 30_000, describe: () => seen });
    expect(applied).to.equal(`unchanged (already credited: on-ramp ${id})`);
    expect((await history(id)).filter((s) => s === 'funded')).to.have.length(1);
  });

  it('a B2C request that ran and was answered HTTP 500 with Daraja\'s error body is no refusal: Transaction Status finds it paid, never refunded', async () => {
    const { id } = await livePayout(rail, 'mobile_money', { phone_number: '+254712350007', mobile_network: 'safaricom' });
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    expect(tx.refund).to.equal(null);
    expect(pathsFor(id)).to.deep.equal([B2C, STATUS]);
    expect(rail.fake.executions.get(id)).to.equal(1);
  });

  it('a queue-timeout callback is no answer: the status is asked before anything is sent again, and a payout that ran is paid once', async () => {
    const { id } = await livePayout(rail, 'mobile_money', { phone_number: '+254712350055', mobile_network: 'safaricom' });
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    expect(rail.fake.executions.get(id)).to.equal(1);
    expect(pathsFor(id)).to.deep.equal([B2C, STATUS]);
    expect(rail.fake.callbacks.some((c) => c.url.endsWith('/timeout') && c.status === 200)).to.equal(true);
  });
});

describe('live M-Pesa: a status check that gives up re-reads the transaction', function () {
  this.timeout(60_000);
  let rail: LiveRail;
  before(async () => {
    // Checks a minute apart: the test runs the last one itself.
    rail = await startLiveRail({ env: { DARAJA_STATUS_QUERY_AFTER_MS: '60000' } });
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  it('a payout refused and refunded while the last check asked M-Pesa is never reopened', async () => {
    const { id } = await livePayout(rail, 'mobile_money', { phone_number: '+254712350088', mobile_network: 'safaricom' });
    await untilStatus(rail.api, rail.key, id, ['processing']);
    const refusal = rail.fake.resultFor(id)!;
    refusal.Result.ResultCode = 2040;
    refusal.Result.ResultDesc = 'Credit Party customer type can\'t be supported by the service.';
    delete refusal.Result.ResultParameters;
    // While the last check waits on Transaction Status, M-Pesa ends the payout with a refusal; its result arrives, is
    // corroborated by a Transaction Status of its own, and the payout fails with its refund.
    rail.fake.beforeStatusAnswer = async () => {
      rail.fake.endPayout(id, '2040', refusal.Result.ResultDesc);
      await fetch(`${rail.apiUrl}/providers/daraja/${CALLBACK_TOKEN}/result`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(refusal) });
      await untilStatus(rail.api, rail.key, id, ['failed']);
    };
    const said = await checkProviderJob.process({ data: { transactionId: id, round: MAX_CHECK_ROUNDS, after: 'r0' } } as never, rail.pools.deps);
    expect(said).to.equal('moved on (failed)');
    const tx = (await rail.api.http.get(`${BASE}/transactions/${id}`).set(bearer(rail.key))).body;
    expect(tx.status).to.equal('failed');
    expect(tx.refund.status).to.equal('completed');
    expect((await history(id)).slice(-2)).to.deep.equal(['processing', 'failed']);
  });
});

describe('live M-Pesa: every stalled collection has an exit', function () {
  this.timeout(60_000);
  let rail: LiveRail;
  before(async () => {
    rail = await startLiveRail({ env: { PROVIDER_RETRY_BASE_MS: '100', PROVIDER_MAX_ATTEMPTS: '2', DARAJA_REQUEST_TIMEOUT_MS: String(ANSWER_TIMEOUT_MS) } });
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  it('an on-ramp whose prompt never left (M-Pesa\'s gateway down) stalls at created, and its retry prompts the payer once and completes', async () => {
    rail.fake.oauthDown = true;
    forgetDarajaTokens(); // the token the pools already hold would still be good
    let id: string;
    try {
      id = await liveOnramp(rail, '+254712360012');
      const stalled = await untilStatus(rail.api, rail.key, id, ['action_required', 'awaiting_funds', 'failed', 'completed']);
      expect(stalled.status).to.equal('action_required');
      expect(stalled.failure.code).to.equal('provider_unavailable');
      expect(rail.fake.checkoutsFor('254712360012')).to.deep.equal([]);
    } finally {
      rail.fake.oauthDown = false;
    }
    const retry = await rail.api.http.post(`${BASE}/transactions/${id}/retry`).set(writeHeaders(rail.key)).send({});
    expect(retry.status, JSON.stringify(retry.body)).to.equal(202);
    expect(retry.body.status).to.equal('created');
    const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    expect(rail.fake.checkoutsFor('254712360012')).to.have.length(1);
    expect(await history(id)).to.deep.equal(['created', 'action_required', 'created', 'awaiting_funds', 'funded', 'processing', 'completed']);
  });

  it('a prompt whose answer and callback were both lost times out after the status checks; the payer\'s payment, reported later, still completes it', async () => {
    // The answer is late (the request times out) and the callback goes nowhere: M-Pesa never names the prompt to us,
    // and the payer has not paid (Pull Transactions lists nothing), so it times out.
    rail.fake.holdMs = LATE_ANSWER_MS;
    rail.fake.callbackOrigin = 'http://127.0.0.1:9';
    let id: string;
    let failed;
    try {
      id = await liveOnramp(rail, '+254712370067');
      failed = await untilStatus(rail.api, rail.key, id, ['failed', 'completed', 'action_required']);
    } finally {
      rail.fake.holdMs = 0;
      rail.fake.callbackOrigin = rail.apiUrl;
    }
    expect(failed.status).to.equal('failed');
    expect(failed.failure.code).to.equal('collection_timeout');
    const checkouts = rail.fake.checkoutsFor('254712370067');
    expect(checkouts).to.have.length(1);
    // The payer approved after all: the success callback arrives, is matched by payer and amount, and is corroborated.
    await rail.fake.payLate(checkouts[0]);
    const tx = await untilStatus(rail.api, rail.key, id, ['completed']);
    expect(await history(id)).to.deep.equal(['created', 'awaiting_funds', 'failed', 'funded', 'processing', 'completed']);
    expect(tx.provider_reference).to.match(/^[A-Z0-9]{10}$/);
    expect(rail.fake.checkoutsFor('254712370067')).to.have.length(1);
  });

  it('of two unnamed prompts of one amount to one phone, a success is matched to the one sent in the last minutes', async () => {
    const unnamed = async () => {
      rail.fake.holdMs = LATE_ANSWER_MS;
      rail.fake.callbackOrigin = 'http://127.0.0.1:9';
      try {
        const id = await liveOnramp(rail, '+254712460067');
        expect((await untilStatus(rail.api, rail.key, id, ['failed', 'completed', 'action_required'])).failure.code).to.equal('collection_timeout');
        return id;
      } finally {
        rail.fake.holdMs = 0;
        rail.fake.callbackOrigin = rail.apiUrl;
      }
    };
    const earlier = await unnamed();
    // An hour passes: the earlier prompt is long over on the payer's phone.
    await (await getDs()).query(`UPDATE provider_requests SET updated_at = now() - interval '1 hour' WHERE kind = 'collection' AND reference = $1`, [earlier]);
    const later = await unnamed();
    const checkouts = rail.fake.checkoutsFor('254712460067');
    expect(checkouts).to.have.length(2);
    await rail.fake.payLate(checkouts[1]);
    expect((await untilStatus(rail.api, rail.key, later, ['completed'])).status).to.equal('completed');
    expect((await rail.api.http.get(`${BASE}/transactions/${earlier}`).set(bearer(rail.key))).body.status).to.equal('failed');
  });

  it('a payment intent\'s prompt whose answer and callback were both lost waits for payment again; the payment, reported later, is a late deposit', async () => {
    const create = await rail.api.http.post(`${BASE}/payment-intents`).set(writeHeaders(rail.key)).send({ amount: { currency: 'KES', value: '1500' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
    expect(create.status, JSON.stringify(create.body)).to.equal(201);
    const id = create.body.id;
    rail.fake.holdMs = LATE_ANSWER_MS;
    rail.fake.callbackOrigin = 'http://127.0.0.1:9';
    let given;
    try {
      const collect = await rail.api.http.post(`${BASE}/payment-intents/${id}/collect`).set(writeHeaders(rail.key))
        .send({ payment_method: { type: 'mobile_money', phone_number: '+254712390067', mobile_network: 'safaricom' } });
      expect(collect.status).to.equal(202);
      given = await until(async () => {
        const intent = (await rail.api.http.get(`${BASE}/payment-intents/${id}`).set(bearer(rail.key))).body;
        return intent.last_payment_error !== null && intent;
      }, { what: 'the prompt timing out' });
    } finally {
      rail.fake.holdMs = 0;
      rail.fake.callbackOrigin = rail.apiUrl;
    }
    expect(given.status).to.equal('awaiting_payment');
    expect(given.last_payment_error.code).to.equal('collection_timeout');
    await rail.fake.payLate(rail.fake.checkoutsFor('254712390067')[0]);
    const deposits = await until(async () => {
      const rows = await (await getDs()).query(`SELECT status, late_payment FROM treasury_deposits WHERE payment_intent_id = $1`, [id]);
      return rows.length > 0 && rows[0].status === 'confirmed' && rows;
    }, { what: 'the late deposit' });
    expect(deposits).to.deep.equal([{ status: 'confirmed', late_payment: true }]);
  });

  it('a payment its callback credited is not credited again when Pull Transactions finds it (fault seed 12000)', async () => {
    // A phone of its own: an unnamed prompt of the same amount to the same phone left by an earlier run would make the
    // callback's match ambiguous.
    const phone = `+2547${String(Math.floor(Math.random() * 1e4)).padStart(4, '0')}0067`;
    const create = await rail.api.http.post(`${BASE}/payment-intents`).set(writeHeaders(rail.key)).send({ amount: { currency: 'KES', value: '1500' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
    const id = create.body.id;
    rail.fake.holdMs = LATE_ANSWER_MS;
    rail.fake.callbackOrigin = 'http://127.0.0.1:9';
    try {
      await rail.api.http.post(`${BASE}/payment-intents/${id}/collect`).set(writeHeaders(rail.key))
        .send({ payment_method: { type: 'mobile_money', phone_number: phone, mobile_network: 'safaricom' } });
      await until(async () => (await rail.api.http.get(`${BASE}/payment-intents/${id}`).set(bearer(rail.key))).body.last_payment_error !== null, { what: 'the prompt timing out' });
    } finally {
      rail.fake.holdMs = 0;
      rail.fake.callbackOrigin = rail.apiUrl;
    }
    await rail.fake.payLate(rail.fake.checkoutsFor(phone.slice(1))[0]);
    const ds = await getDs();
    const credited = await until(async () => {
      const rows = await ds.query(`SELECT receipt FROM treasury_deposits WHERE payment_intent_id = $1 AND status = 'confirmed'`, [id]);
      return rows.length > 0 && rows;
    }, { what: 'the callback\'s deposit' });
    expect(credited[0].receipt).to.match(/^[A-Z0-9]{10}$/);
    // As in seed 12000: the prompt's request holds no CheckoutRequestID (a status check read it before the callback
    // taught it one), so the next check asks Pull Transactions, which lists the same payment under its receipt.
    await ds.query(`UPDATE provider_requests SET status = 'sending', provider_reference = NULL WHERE kind = 'collection' AND reference = $1`, [`${id}-1`]);
    const pullsBefore = rail.fake.log.filter((r) => r.path === '/pulltransactions/v1/query').length;
    await checkProviderJob.process({ data: { intentId: id, attempt: 1, round: MAX_CHECK_ROUNDS } } as never, rail.pools.deps);
    expect(rail.fake.log.filter((r) => r.path === '/pulltransactions/v1/query').length).to.be.above(pullsBefore);
    const deposits = await ds.query(`SELECT receipt FROM treasury_deposits WHERE payment_intent_id = $1`, [id]);
    expect(deposits).to.deep.equal([{ receipt: credited[0].receipt }]);
  });

  it('a payment to an intent\'s second prompt is not found again for its first (fault seed 12000): each prompt has its own AccountReference', async () => {
    const create = await rail.api.http.post(`${BASE}/payment-intents`).set(writeHeaders(rail.key)).send({ amount: { currency: 'KES', value: '1500' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
    const id = create.body.id;
    const first = `+2547${String(Math.floor(Math.random() * 1e4)).padStart(4, '0')}0067`;
    const second = `+2547${String(Math.floor(Math.random() * 1e4)).padStart(4, '0')}0010`;
    const collect = (phone: string) => rail.api.http.post(`${BASE}/payment-intents/${id}/collect`).set(writeHeaders(rail.key))
      .send({ payment_method: { type: 'mobile_money', phone_number: phone, mobile_network: 'safaricom' } });
    // The first prompt is never named to us and times out on the phone; the intent waits for payment again.
    rail.fake.holdMs = LATE_ANSWER_MS;
    rail.fake.callbackOrigin = 'http://127.0.0.1:9';
    try {
      expect((await collect(first)).status).to.equal(202);
      await until(async () => (await rail.api.http.get(`${BASE}/payment-intents/${id}`).set(bearer(rail.key))).body.last_payment_error !== null, { what: 'the first prompt timing out' });
      rail.fake.holdMs = 0;
      // The second is paid; its callback is lost, so STK Query finds it paid (it names no receipt).
      expect((await collect(second)).status).to.equal(202);
      const ds = await getDs();
      await until(async () => (await ds.query(`SELECT 1 FROM treasury_deposits WHERE payment_intent_id = $1 AND status = 'confirmed'`, [id])).length > 0, { what: 'the second prompt\'s deposit' });
    } finally {
      rail.fake.holdMs = 0;
      rail.fake.callbackOrigin = rail.apiUrl;
    }
    const pushes = rail.fake.log.filter((r) => r.path === '/mpesa/stkpush/v1/processrequest' && [first, second].includes(`+${r.body.PhoneNumber}`));
    expect(pushes.map((r) => r.body.AccountReference)).to.deep.equal([`${id.replace(/-/g, '').slice(0, 11)}1`, `${id.replace(/-/g, '').slice(0, 11)}2`]);
    // The first prompt is still asked about: Pull Transactions lists the second's payment, which is not the first's.
    await checkProviderJob.process({ data: { intentId: id, attempt: 1, round: MAX_CHECK_ROUNDS } } as never, rail.pools.deps);
    const deposits = await (await getDs()).query(`SELECT payment_key FROM treasury_deposits WHERE payment_intent_id = $1`, [id]);
    expect(deposits).to.have.length(1);
    expect(deposits[0].payment_key).to.match(/^ws_CO_/);
  });
});

describe('live M-Pesa: status results slower than the checks', function () {
  this.timeout(60_000);
  let rail: LiveRail;
  before(async () => {
    rail = await startLiveRail({ env: { DARAJA_STATUS_QUERY_AFTER_MS: '1000' } });
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  it('a payout whose result is lost completes on the answer to an earlier Transaction Status query, though newer queries were sent meanwhile', async () => {
    // The B2C result never arrives; each Transaction Status result takes 2.5 s, while a check asks again every second.
    rail.fake.loses = (url) => url.endsWith('/result');
    rail.fake.callbackDelayMs = 2500;
    try {
      const { id } = await livePayout(rail, 'mobile_money', { phone_number: '+254712350051', mobile_network: 'safaricom' });
      const tx = await untilStatus(rail.api, rail.key, id, ['completed', 'failed', 'action_required']);
      expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
      expect(rail.fake.executions.get(id)).to.equal(1);
      expect(rail.fake.payoutsTo(id)).to.have.length(1);
    } finally {
      rail.fake.loses = null;
      rail.fake.callbackDelayMs = 30;
    }
  });
});
