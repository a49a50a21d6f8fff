import { expect } from 'chai';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey } from '../helpers/factories.js';
import { responseAjv } from '../fuzz/operations.js';
import { listCorridors } from '../../shared/domain/corridors.js';
import { FIAT_SCALES } from '../../shared/domain/money.js';

const PATH = '/api/v1/business/corridors';

describe('GET /api/v1/business/corridors', () => {
  let api: ApiHarness;
  let validate: (body: unknown) => boolean;
  before(async () => {
    api = await startApi();
    const ajv = responseAjv((await api.http.get('/openapi.json')).body);
    const fn = ajv.compile({ $ref: 'openapi.json#/components/schemas/CorridorList' });
    validate = (body) => fn(body) || expect.fail(JSON.stringify(fn.errors));
  });
  after(() => api.close());

  it('lists every corridor of the registry, in one page that matches its schema', async () => {
    const biz = await makeBusiness();
    const res = await api.http.get(PATH).set(bearer(biz.sandboxKey));
    expect(res.status).to.equal(200);
    validate(res.body);
    expect(res.body).to.include({ has_more: false, next_cursor: null });
    const registry = listCorridors();
    expect(res.body.data.map((c: { currency: string; payment_method: string }) => `${c.currency}:${c.payment_method}`))
      .to.deep.equal(registry.map((c) => `${c.currency}:${c.payment_method}`));
    for (const [i, c] of registry.entries()) {
      const item = res.body.data[i];
      expect(item).to.include({ currency: c.currency, payment_method: c.payment_method, min_amount: c.min_amount, max_amount: c.max_amount });
      expect(item.currency_scale).to.equal(FIAT_SCALES[c.currency]);
      expect(item.directions).to.deep.equal([...c.directions]);
      expect(item.live_available).to.equal(c.provider === 'mpesa_daraja');
      const network = c.fields.find((f) => f.name === 'mobile_network');
      if (network) expect(item.networks).to.deep.equal([...network.enum!]);
      else expect(item).not.to.have.property('networks');
      // Amounts at exactly the currency's scale.
      const decimals = (a: string) => a.split('.')[1]?.length ?? 0;
      expect(decimals(item.min_amount), c.currency).to.equal(item.currency_scale);
      expect(decimals(item.max_amount), c.currency).to.equal(item.currency_scale);
    }
  });

  it('shows what the contract names: KES mobile money live with both directions and its networks, SWIFT not live', async () => {
    const biz = await makeBusiness();
    const { data } = (await api.http.get(PATH).set(bearer(biz.sandboxKey))).body as { data: Record<string, unknown>[] };
    const find = (currency: string, method: string) => data.find((c) => c.currency === currency && c.payment_method === method);
    expect(find('KES', 'mobile_money')).to.deep.equal({
      currency: 'KES', payment_method: 'mobile_money', currency_scale: 2, min_amount: '10.00', max_amount: '250000.00',
      live_available: true, directions: ['offramp', 'onramp'], networks: ['safaricom', 'airtel'], live_networks: ['safaricom', 'airtel'],
    });
    expect(find('TZS', 'mobile_money')!.networks).to.deep.equal(['mtn', 'airtel', 'vodacom']);
    expect(find('UGX', 'mobile_money')).to.include({ currency_scale: 0, min_amount: '500', live_available: false });
    expect(find('USD', 'swift_transfer')).to.include({ live_available: false });
    expect(data.filter((c) => c.live_available).map((c) => c.currency)).to.satisfy((cs: string[]) => cs.every((c) => c === 'KES'));
  });

  it('answers any valid key, sandbox or live, whatever its scopes; no key is 401', async () => {
    const biz = await makeBusiness();
    const noScopes = await makeKey(biz.businessId, { scopes: [] });
    const liveReadOnly = await makeKey(biz.businessId, { environment: 'live', scopes: ['customers:read'] });
    const sandbox = (await api.http.get(PATH).set(bearer(biz.sandboxKey))).body;
    for (const key of [biz.liveKey, noScopes.key, liveReadOnly.key]) {
      const res = await api.http.get(PATH).set(bearer(key));
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal(sandbox);
    }
    const anonymous = await api.http.get(PATH);
    expect(anonymous.status).to.equal(401);
    expect(anonymous.body.error.code).to.equal('unauthorized');
  });

  it('is documented with any-key access', async () => {
    const op = (await api.http.get('/openapi.json')).body.paths[PATH].get;
    expect(op.operationId).to.equal('listCorridors');
    expect(op['x-required-scope']).to.equal('any');
  });
});
