import { expect } from 'chai';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness } from '../helpers/factories.js';

describe('GET /api/v1/business/account', () => {
  let api: ApiHarness;
  before(async () => {
    api = await startApi();
  });
  after(() => api.close());

  it('answers the business account of the sandbox key', async () => {
    const biz = await makeBusiness('Acme Payments');
    const res = await api.http.get('/api/v1/business/account').set(bearer(biz.sandboxKey));
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ id: biz.businessId, name: 'Acme Payments', environment: 'sandbox', status: 'active', live_enabled: false });
    expect(res.body.api_key.prefix).to.match(/^svc_test_/);
    expect(res.body.api_key.scopes).to.include('customers:read');
    expect(res.body.api_key.rate_limit).to.deep.equal({ limit: 1000, window_seconds: 60 });
    expect(JSON.stringify(res.body)).not.to.contain(biz.sandboxKey);
    expect(res.headers['x-request-id']).to.match(/^[0-9a-f-]{36}$/);
    expect(res.headers['x-ratelimit-limit']).to.equal('1000');
  });

  it('answers the live environment for a live key', async () => {
    const biz = await makeBusiness();
    const res = await api.http.get('/api/v1/business/account').set(bearer(biz.liveKey));
    expect(res.status).to.equal(200);
    expect(res.body.environment).to.equal('live');
    expect(res.body.api_key.prefix).to.match(/^svc_live_/);
  });
});
