import { expect } from 'chai';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { getConfig } from '../../shared/config.js';
import { setFees } from '../../shared/admin/commands.js';
import { platformFeeOf } from '../../shared/domain/fees.js';

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

  it('shows the business\'s platform fee: 50 bps and no minimum by default, then what set-fees sets, in both environments', async () => {
    const biz = await makeBusiness();
    const fees = async (key: string) => (await api.http.get('/api/v1/business/account').set(bearer(key))).body.fees;
    expect(await fees(biz.sandboxKey)).to.deep.equal({ platform_bps: 50, platform_min: '0.000000' });
    const ds = await getDs();
    expect(await platformFeeOf(ds, biz.businessId)).to.deep.equal({ bps: 50, min: '0.000000' });

    await setFees({ ds, config: getConfig() }, { businessId: biz.businessId, platformBps: 80, platformMin: '0.25' });
    api.keyCache.clear(); // what the CLI's change notice does in a subscribed web process
    for (const key of [biz.sandboxKey, biz.liveKey]) expect(await fees(key)).to.deep.equal({ platform_bps: 80, platform_min: '0.250000' });
    expect(await platformFeeOf(ds, biz.businessId)).to.deep.equal({ bps: 80, min: '0.250000' });
  });

  it('the database refuses a fee out of range or finer than USDC\'s 6 decimals', async () => {
    const biz = await makeBusiness();
    const ds = await getDs();
    for (const [column, value] of [['platform_fee_bps', 10_001], ['platform_fee_bps', -1], ['platform_fee_min', '-0.01'], ['platform_fee_min', '0.0000001']] as const) {
      const err = await ds.query(`UPDATE businesses SET ${column} = $2 WHERE id = $1`, [biz.businessId, value]).then(() => null, (e: Error) => e);
      expect(err, `${column} = ${value}`).to.be.instanceOf(Error);
      expect(err!.message).to.match(/check constraint/);
    }
  });
});
