import { expect } from 'chai';
import type supertest from 'supertest';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { BASE, createCustomer } from '../helpers/wallets.js';

// The messages a new integrator meets first, as the API answers them: each says what is wrong and what to do, and
// every refusal that concerns a corridor names GET /corridors.
const CORRIDORS = ' GET /corridors lists every currency, payment method and direction we serve.';

describe('messages for common first-day mistakes', () => {
  let api: ApiHarness;
  let key: string;
  let walletId: string;
  let kesBeneficiary: string;

  function refused(res: supertest.Response, status: number, code: string): string {
    expect(res.status, res.text).to.equal(status);
    expect(res.body.error.code, res.text).to.equal(code);
    return res.body.error.message;
  }
  const intent = (amount: Record<string, string>) =>
    api.http.post(`${BASE}/payment-intents`).set(writeHeaders(key)).send({ amount, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
  const quote = (body: Record<string, unknown>) => api.http.post(`${BASE}/quotes`).set(writeHeaders(key)).send({ chain: 'base', ...body });

  before(async () => {
    // The test configuration is a development one with WEBHOOKS_ALLOW_LOOPBACK unset.
    api = await startApi({ env: { WEBHOOKS_ALLOW_LOOPBACK: 'false' } });
    key = (await makeBusiness()).sandboxKey;
    walletId = (await createCustomer(api, key)).wallet.id;
    const b = await api.http.post(`${BASE}/beneficiaries`).set(writeHeaders(key)).send({
      currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Amina W', details: { phone_number: '+254722480163', mobile_network: 'safaricom' },
    });
    expect(b.status, b.text).to.equal(201);
    kesBeneficiary = b.body.id;
  });
  after(() => api?.close());

  it('an on-ramp in NGN says NGN is only paid out, offering no off-ramp method as an on-ramp one', async () => {
    const res = await quote({ direction: 'onramp', currency: 'NGN', payment_method: 'mobile_money', destination_amount: '50', wallet_id: walletId });
    expect(refused(res, 422, 'unsupported_corridor')).to.equal(
      `We do not collect NGN by mobile_money: NGN is paid out only (off-ramps, by bank_transfer); no on-ramps run in it.${CORRIDORS}`,
    );
    expect(res.body.error.details).to.deep.equal({ currency: 'NGN', payment_method: 'mobile_money', direction: 'onramp', supported_payment_methods: [] });
  });

  it('an on-ramp by a method that only pays out lists the methods that collect', async () => {
    const res = await quote({ direction: 'onramp', currency: 'KES', payment_method: 'paybill', destination_amount: '50', wallet_id: walletId });
    expect(refused(res, 422, 'unsupported_corridor')).to.equal(`We do not collect KES by paybill: KES is collected by mobile_money.${CORRIDORS}`);
    expect(res.body.error.details).to.deep.include({ reason: 'direction_not_supported', supported_payment_methods: ['mobile_money'], supported_directions: ['offramp'] });
  });

  it('an off-ramp pair we do not serve lists the methods that pay out', async () => {
    const res = await api.http.get(`${BASE}/beneficiaries/requirements?currency=NGN&payment_method=mobile_money`).set(bearer(key));
    expect(refused(res, 422, 'unsupported_corridor')).to.equal(`We do not pay out NGN by mobile_money: NGN is paid out by bank_transfer.${CORRIDORS}`);
    expect(res.body.error.details).to.deep.include({ supported_payment_methods: ['bank_transfer'] });
  });

  it('an unknown currency points at GET /corridors, wherever it is named', async () => {
    const expected = `We do not serve XYZ.${CORRIDORS}`;
    expect(refused(await quote({ direction: 'offramp', currency: 'XYZ', payment_method: 'mobile_money', source_amount: '10', beneficiary_id: kesBeneficiary }), 422, 'unsupported_corridor')).to.equal(expected);
    expect(refused(await api.http.get(`${BASE}/beneficiaries/requirements?currency=xyz&payment_method=bank_transfer`).set(bearer(key)), 422, 'unsupported_corridor')).to.equal(expected);
    const beneficiary = await api.http.post(`${BASE}/beneficiaries`).set(writeHeaders(key)).send({ currency: 'XYZ', payment_method: 'bank_transfer', account_holder_name: 'A', details: {} });
    expect(refused(beneficiary, 422, 'unsupported_corridor')).to.equal(expected);
    expect(refused(await intent({ currency: 'XYZ', value: '10' }), 422, 'unsupported_corridor')).to.equal(expected);
  });

  it('every other corridor refusal names GET /corridors: a beneficiary of another corridor, an amount outside the limits, a currency not collected', async () => {
    const mismatch = await quote({ direction: 'offramp', currency: 'NGN', payment_method: 'bank_transfer', source_amount: '10', beneficiary_id: kesBeneficiary });
    expect(refused(mismatch, 422, 'unsupported_corridor')).to.equal(`This beneficiary is paid in KES by mobile_money, not NGN by bank_transfer.${CORRIDORS}`);
    expect(refused(await intent({ currency: 'KES', value: '1' }), 422, 'amount_out_of_range')).to.equal(`A KES mobile-money collection must be between 10.00 and 250000.00 KES.${CORRIDORS}`);
    expect(refused(await intent({ currency: 'NGN', value: '1000' }), 422, 'unsupported_corridor')).to.match(/^We do not collect NGN by mobile money; /).and.satisfy((m: string) => m.endsWith(CORRIDORS));
  });

  it('a loopback webhook URL in sandbox says how to reach a local receiver, naming WEBHOOKS_ALLOW_LOOPBACK', async () => {
    const hint = ' To reach a receiver on your machine, expose it at a public https URL (a tunnel), or run this service with WEBHOOKS_ALLOW_LOOPBACK=true ' +
      '(sandbox endpoints may then use http and loopback addresses; local development only).';
    const register = (url: string) => api.http.post(`${BASE}/webhook-endpoints`).set(writeHeaders(key)).send({ url });
    const http = await register('http://127.0.0.1:4000/webhooks');
    expect(refused(http, 400, 'invalid_request')).to.equal(`url must use https.${hint}`);
    expect(http.body.error.details).to.deep.equal([{ path: 'url', in: 'body', message: `url must use https.${hint}` }]);
    expect(refused(await register('https://127.0.0.1/webhooks'), 400, 'invalid_request')).to.equal(`url host is a loopback address.${hint}`);
    expect(refused(await register('https://10.1.2.3/webhooks'), 400, 'invalid_request'), 'no hint where a local receiver is not the point').to.equal('url host is a private address.');
  });

  it('Authorization without Bearer says the header must be "Bearer <key>", never repeating the key', async () => {
    const answer = async (value: string) => {
      const res = await api.http.get(`${BASE}/account`).set('Authorization', value);
      const message = refused(res, 401, 'unauthorized');
      expect(res.text).to.not.include(key);
      return message;
    };
    expect(await answer(key)).to.equal('The Bearer prefix is missing: the header must be "Authorization: Bearer <key>".');
    expect(await answer(`  ${key} `)).to.equal('The Bearer prefix is missing: the header must be "Authorization: Bearer <key>".');
    expect(await answer('Bearer')).to.equal('The API key is missing after Bearer: the header must be "Authorization: Bearer <key>".');
    expect(await answer(`Basic ${Buffer.from(`${key}:`).toString('base64')}`)).to.equal('Malformed Authorization header: the header must be "Authorization: Bearer <key>".');
    expect(await answer('Bearer sk_live_abc')).to.equal('Malformed API key: keys start with svc_test_ (sandbox) or svc_live_ (live); send "Authorization: Bearer <key>".');
    expect(refused(await api.http.get(`${BASE}/account`), 401, 'unauthorized')).to.equal('Missing API key: send Authorization: Bearer <key>.');
    expect((await api.http.get(`${BASE}/account`).set('Authorization', `bearer ${key}`)).status, 'the scheme is case-insensitive').to.equal(200);
  });
});
