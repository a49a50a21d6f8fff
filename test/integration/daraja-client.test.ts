import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { loadConfig } from '../../shared/config.js';
import { DarajaClient, darajaTimestamp, forgetDarajaTokens, nairobiTime, stkPassword } from '../../shared/providers/daraja/daraja-client.js';
import { startApi } from '../helpers/harness.js';
import { getDs } from '../helpers/shared.js';
import { darajaEnv, startFakeDaraja, type FakeDaraja } from '../helpers/fake-daraja.js';

const TOKEN = 'cbtok_client_test_0123456789';
// Unique per run: callbacks are kept, and the test database outlives a run.
const CHECKOUT = `ws_CO_allowlist_${randomUUID()}`;
const STK_BODY = { Body: { stkCallback: { MerchantRequestID: 'm-1', CheckoutRequestID: CHECKOUT, ResultCode: 0, ResultDesc: 'ok' } } };

describe('the Daraja client and callback gate', function () {
  this.timeout(20_000);
  let fake: FakeDaraja;
  let client: DarajaClient;
  before(async () => {
    fake = await startFakeDaraja();
    const config = loadConfig({ ...process.env, ...darajaEnv(fake, 'https://rampway.example', TOKEN) });
    client = new DarajaClient({ ...config.daraja, publicBaseUrl: config.publicBaseUrl });
  });
  beforeEach(() => {
    forgetDarajaTokens();
    fake.tokenRequests = 0;
    fake.expiresIn = 3599;
  });
  after(() => fake?.close());

  it('STK password is base64(shortcode + passkey + timestamp), the timestamp in Nairobi time', () => {
    expect(darajaTimestamp(new Date('2026-01-31T22:15:09Z'))).to.equal('20260201011509');
    expect(Buffer.from(stkPassword('174379', 'pk', '20260201011509'), 'base64').toString()).to.equal('174379pk20260201011509');
  });

  it('Pull Transactions: a paid prompt is found by its AccountReference in its window (Nairobi time), none outside it', async () => {
    expect(nairobiTime(new Date('2026-01-31T22:15:09Z'))).to.equal('2026-02-01 01:15:09');
    const reference = randomUUID().replace(/-/g, '').slice(0, 12);
    const timestamp = darajaTimestamp();
    const pushed = await client.stkPush({
      BusinessShortCode: client.shortcode, Password: client.stkPassword(timestamp), Timestamp: timestamp, TransactionType: 'CustomerPayBillOnline', Amount: 1500,
      PartyA: '254712345678', PartyB: client.shortcode, PhoneNumber: '254712345678', CallBackURL: client.callbackUrl('stk'), AccountReference: reference, TransactionDesc: 'Rampway',
    });
    expect(pushed.body?.ResponseCode).to.equal('0');
    const around = await client.pullTransactions(new Date(Date.now() - 60_000), new Date(Date.now() + 60_000));
    expect(around.body).to.include({ ResponseCode: '1000' });
    const found = (around.body!.Response as Record<string, unknown>[][]).flat().filter((t) => t.billreference === reference);
    expect(found).to.have.length(1);
    expect(found[0]).to.include({ amount: '1500', msisdn: 254712345678, transactiontype: 'c2b-pay-bill-debit' });
    expect(found[0].transactionId).to.match(/^[A-Z0-9]{10}$/);
    const before = await client.pullTransactions(new Date(Date.now() - 7_200_000), new Date(Date.now() - 3_600_000));
    expect(before.body).to.include({ ResponseCode: '1001' });
  });

  it('twenty concurrent callers share one token request; the token is reused until it expires, then one refresh', async () => {
    const tokens = await Promise.all(Array.from({ length: 20 }, () => client.token()));
    expect(new Set(tokens).size).to.equal(1);
    expect(fake.tokenRequests).to.equal(1);
    await Promise.all(Array.from({ length: 5 }, () => client.stkQuery('ws_CO_unknown')));
    expect(fake.tokenRequests).to.equal(1);

    // A token good for 31 s is renewed 30 s early: after one second every caller needs a new one, and they share it.
    forgetDarajaTokens();
    fake.expiresIn = 31;
    await client.token();
    await new Promise((r) => setTimeout(r, 1_100));
    const answers = await Promise.all(Array.from({ length: 10 }, () => client.stkQuery('ws_CO_unknown')));
    expect(answers.map((a) => a.status)).to.deep.equal(Array(10).fill(400));
    expect(fake.tokenRequests).to.equal(3);
  });

  it('wrong credentials are a temporary provider error that names no secret', async () => {
    const config = loadConfig({ ...process.env, ...darajaEnv(fake, 'https://rampway.example', TOKEN), DARAJA_CONSUMER_SECRET: 'wrong-secret-77' });
    const bad = new DarajaClient({ ...config.daraja, publicBaseUrl: config.publicBaseUrl });
    const err = await bad.token().then(() => null, (e: Error & { code?: string }) => e);
    expect(err?.code).to.equal('service_unavailable');
    expect(err?.message).to.match(/OAuth/).and.not.to.contain('wrong-secret-77');
  });

  it('DARAJA_CALLBACK_ALLOWED_IPS: a callback from another address is refused like an unknown route and not stored', async () => {
    const api = await startApi({ env: { ...darajaEnv(fake, 'https://rampway.example', TOKEN), DARAJA_CALLBACK_ALLOWED_IPS: '10.9.9.9' } });
    try {
      const res = await api.http.post(`/providers/daraja/${TOKEN}/stk`).send(STK_BODY);
      expect(res.status).to.equal(404);
      const rows = await (await getDs()).query(`SELECT 1 FROM provider_callbacks WHERE body::text LIKE '%' || $1 || '%'`, [CHECKOUT]);
      expect(rows).to.deep.equal([]);
    } finally {
      await api.close();
    }
    const open = await startApi({ env: { ...darajaEnv(fake, 'https://rampway.example', TOKEN), DARAJA_CALLBACK_ALLOWED_IPS: '127.0.0.1,::1' } });
    try {
      const started = performance.now();
      const res = await open.http.post(`/providers/daraja/${TOKEN}/stk`).send(STK_BODY);
      // Acknowledged once stored: no provider call, no transition on the web process (generous bound for a busy CI).
      expect(performance.now() - started).to.be.below(500);
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal({ ResultCode: 0, ResultDesc: 'Accepted' });
      // The same body again: acknowledged, stored once.
      expect((await open.http.post(`/providers/daraja/${TOKEN}/stk`).send(STK_BODY)).status).to.equal(200);
      const rows = await (await getDs()).query(`SELECT 1 FROM provider_callbacks WHERE body::text LIKE '%' || $1 || '%'`, [CHECKOUT]);
      expect(rows).to.have.length(1);
      // Not a business API operation: the document (and so the fuzz) leaves it out.
      const doc = (await open.http.get('/openapi.json')).body;
      expect(Object.keys(doc.paths).filter((p) => p.includes('providers'))).to.deep.equal([]);
    } finally {
      await open.close();
    }
  });
});
