import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey, writeHeaders, type TestBusiness } from '../helpers/factories.js';
import { BASE, createCustomer, externalWallet } from '../helpers/wallets.js';
import { getAddress, type Address } from 'viem';
import { getConfig } from '../../shared/config.js';
import { BALANCE_CACHE_MS } from '../../shared/chain/usdc.js';
import { deadRpcUrl, deployTestUsdc, mintUsdc, startAnvil, type Anvil } from '../helpers/chain.js';

describe('wallet balances (sandbox) and sandbox funding', () => {
  let api: ApiHarness;
  let biz: TestBusiness;
  before(async () => {
    api = await startApi();
    biz = await makeBusiness();
  });
  after(() => api.close());

  const balance = (key: string, walletId: string, chain?: string) =>
    api.http.get(`${BASE}/wallets/${walletId}/balance${chain ? `?chain=${chain}` : ''}`).set(bearer(key));
  const fund = (key: string, walletId: string, body: object) => api.http.post(`${BASE}/sandbox/wallets/${walletId}/fund`).set(writeHeaders(key)).send(body);

  it('starts a managed wallet at zero on every chain and needs the chain', async () => {
    const customer = await createCustomer(api, biz.sandboxKey);
    const missing = await balance(biz.sandboxKey, customer.wallet.id);
    expect(missing.status).to.equal(400);
    expect(missing.body.error.code).to.equal('invalid_request');
    const res = await balance(biz.sandboxKey, customer.wallet.id, 'arbitrum');
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ wallet_id: customer.wallet.id, chain: 'arbitrum', asset: 'USDC', available: '0.000000', simulated: true });
    expect(res.body.token_address).to.equal(getConfig().chains.arbitrum.usdcAddress);
    expect(Date.parse(res.body.checked_at)).to.be.closeTo(Date.now(), 60_000);
    expect((await balance(biz.sandboxKey, customer.wallet.id, 'solana')).status).to.equal(400);
  });

  it('credits funding per chain, at exactly 6 decimals', async () => {
    const customer = await createCustomer(api, biz.sandboxKey);
    const first = await fund(biz.sandboxKey, customer.wallet.id, { chain: 'base', amount: '100' });
    expect(first.status).to.equal(200);
    expect(first.body).to.include({ wallet_id: customer.wallet.id, chain: 'base', asset: 'USDC', amount: '100.000000' });
    expect(first.body.balance).to.include({ available: '100.000000', simulated: true, chain: 'base' });
    await fund(biz.sandboxKey, customer.wallet.id, { chain: 'base', amount: '0.5' });
    await fund(biz.sandboxKey, customer.wallet.id, { chain: 'polygon', amount: '0.000001' });
    expect((await balance(biz.sandboxKey, customer.wallet.id, 'base')).body.available).to.equal('100.500000');
    expect((await balance(biz.sandboxKey, customer.wallet.id, 'polygon')).body.available).to.equal('0.000001');
    expect((await balance(biz.sandboxKey, customer.wallet.id, 'optimism')).body.available).to.equal('0.000000');
  });

  it('defaults an external wallet to its own chain and refuses another', async () => {
    const { wallet } = await externalWallet(api, biz.sandboxKey, 'optimism');
    expect((await fund(biz.sandboxKey, wallet.id, { chain: 'optimism', amount: '12.34' })).status).to.equal(200);
    const res = await balance(biz.sandboxKey, wallet.id);
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ chain: 'optimism', available: '12.340000' });
    expect((await balance(biz.sandboxKey, wallet.id, 'optimism')).body.available).to.equal('12.340000');
    expect((await balance(biz.sandboxKey, wallet.id, 'base')).status).to.equal(400);
    expect((await fund(biz.sandboxKey, wallet.id, { chain: 'base', amount: '1' })).status).to.equal(400);
  });

  it('replays a funding retried with the same Idempotency-Key instead of crediting twice', async () => {
    const customer = await createCustomer(api, biz.sandboxKey);
    const headers = writeHeaders(biz.sandboxKey);
    const first = await api.http.post(`${BASE}/sandbox/wallets/${customer.wallet.id}/fund`).set(headers).send({ chain: 'base', amount: '5' });
    const again = await api.http.post(`${BASE}/sandbox/wallets/${customer.wallet.id}/fund`).set(headers).send({ chain: 'base', amount: '5' });
    expect(again.headers['idempotent-replayed']).to.equal('true');
    expect(again.body).to.deep.equal(first.body);
    expect((await balance(biz.sandboxKey, customer.wallet.id, 'base')).body.available).to.equal('5.000000');
  });

  it('rejects bad amounts with 400', async () => {
    const customer = await createCustomer(api, biz.sandboxKey);
    for (const amount of ['0', '0.000000', '1.0000001', '-1', '1e3', '', '1000000000.000001', 12]) {
      const res = await fund(biz.sandboxKey, customer.wallet.id, { chain: 'base', amount });
      expect(res.status, String(amount)).to.equal(400);
      expect(res.body.error.code).to.equal('invalid_request');
    }
    expect((await fund(biz.sandboxKey, customer.wallet.id, { amount: '1' })).status).to.equal(400);
    expect((await fund(biz.sandboxKey, customer.wallet.id, { chain: 'base', amount: '1', extra: 1 })).status).to.equal(400);
    expect((await fund(biz.sandboxKey, customer.wallet.id, { chain: 'base', amount: '1000000000' })).status).to.equal(200);
    expect((await balance(biz.sandboxKey, customer.wallet.id, 'base')).body.available).to.equal('1000000000.000000');
  });

  it('refuses to fund an archived wallet (409 resource_archived)', async () => {
    const { wallet } = await externalWallet(api, biz.sandboxKey);
    await api.http.delete(`${BASE}/wallets/${wallet.id}`).set(writeHeaders(biz.sandboxKey));
    const res = await fund(biz.sandboxKey, wallet.id, { chain: 'base', amount: '1' });
    expect(res.status).to.equal(409);
    expect(res.body.error.code).to.equal('resource_archived');
  });

  it('keeps businesses and environments apart', async () => {
    const customer = await createCustomer(api, biz.sandboxKey);
    await fund(biz.sandboxKey, customer.wallet.id, { chain: 'base', amount: '3' });
    const other = await makeBusiness();
    expect((await balance(other.sandboxKey, customer.wallet.id, 'base')).status).to.equal(404);
    expect((await fund(other.sandboxKey, customer.wallet.id, { chain: 'base', amount: '1' })).status).to.equal(404);
    expect((await balance(biz.liveKey, customer.wallet.id, 'base')).status).to.equal(404);
    // A live key does not see the sandbox controls at all.
    const live = await fund(biz.liveKey, customer.wallet.id, { chain: 'base', amount: '1' });
    expect(live.status).to.equal(404);
    expect((await balance(biz.sandboxKey, customer.wallet.id, 'base')).body.available).to.equal('3.000000');
    expect((await fund(biz.sandboxKey, randomUUID(), { chain: 'base', amount: '1' })).status).to.equal(404);
  });

  it('needs sandbox:write to fund and wallets:read to read a balance', async () => {
    const customer = await createCustomer(api, biz.sandboxKey);
    const noSandbox = await makeKey(biz.businessId, { scopes: ['wallets:read', 'wallets:write'] });
    const res = await fund(noSandbox.key, customer.wallet.id, { chain: 'base', amount: '1' });
    expect(res.status).to.equal(403);
    expect(res.body.error.details).to.deep.equal({ required_scope: 'sandbox:write' });
    const noRead = await makeKey(biz.businessId, { scopes: ['wallets:write', 'sandbox:write'] });
    const read = await balance(noRead.key, customer.wallet.id, 'base');
    expect(read.status).to.equal(403);
    expect(read.body.error.details).to.deep.equal({ required_scope: 'wallets:read' });
  });

  it('answers 503 with Retry-After for a live balance when the chain\'s RPC cannot be reached', async () => {
    // The test run points every chain at a local port nothing listens on (test/setup.ts).
    const customer = await createCustomer(api, biz.liveKey);
    const res = await balance(biz.liveKey, customer.wallet.id, 'avalanche');
    expect(res.status).to.equal(503);
    expect(res.body.error.code).to.equal('service_unavailable');
    expect(Number(res.headers['retry-after'])).to.be.greaterThan(0);
    expect(JSON.stringify(res.body)).not.to.match(/127\.0\.0\.1|ECONNREFUSED/);
  });
});

describe('wallet balances (live, against Anvil)', function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let token: Address;
  let api: ApiHarness;
  let biz: TestBusiness;
  before(async () => {
    anvil = await startAnvil({ chainId: 8453 });
    token = await deployTestUsdc(anvil);
    api = await startApi({ env: { RPC_URL_BASE: anvil.rpcUrl, USDC_ADDRESS_BASE: token } });
    biz = await makeBusiness();
  });
  after(async () => {
    await api?.close();
    await anvil?.stop();
  });

  const balance = (key: string, walletId: string, chain?: string) =>
    api.http.get(`${BASE}/wallets/${walletId}/balance${chain ? `?chain=${chain}` : ''}`).set(bearer(key));

  it('reads balanceOf on the configured USDC contract, at exactly 6 decimals', async () => {
    const customer = await createCustomer(api, biz.liveKey);
    await mintUsdc(anvil, token, customer.wallet.address as Address, 123_456_789n);
    const res = await balance(biz.liveKey, customer.wallet.id, 'base');
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ wallet_id: customer.wallet.id, chain: 'base', asset: 'USDC', available: '123.456789', simulated: false, token_address: getAddress(token) });
    expect((await balance(biz.liveKey, customer.wallet.id)).status).to.equal(400);
  });

  it('reads an external wallet on its own chain by default', async () => {
    const { wallet } = await externalWallet(api, biz.liveKey, 'base');
    await mintUsdc(anvil, token, wallet.address as Address, 1n);
    const res = await balance(biz.liveKey, wallet.id);
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ chain: 'base', available: '0.000001', simulated: false });
  });

  it('reuses a read for a few seconds, then reads again', async () => {
    const customer = await createCustomer(api, biz.liveKey);
    await mintUsdc(anvil, token, customer.wallet.address as Address, 5_000_000n);
    const first = await balance(biz.liveKey, customer.wallet.id, 'base');
    await mintUsdc(anvil, token, customer.wallet.address as Address, 1_000_000n);
    const cached = await balance(biz.liveKey, customer.wallet.id, 'base');
    expect(cached.body).to.deep.equal(first.body);
    await new Promise((resolve) => setTimeout(resolve, BALANCE_CACHE_MS + 100));
    const fresh = await balance(biz.liveKey, customer.wallet.id, 'base');
    expect(fresh.body.available).to.equal('6.000000');
    expect(Date.parse(fresh.body.checked_at)).to.be.greaterThan(Date.parse(first.body.checked_at));
  });

  it('keeps sandbox on the ledger even where a chain is configured', async () => {
    const customer = await createCustomer(api, biz.sandboxKey);
    await mintUsdc(anvil, token, customer.wallet.address as Address, 9_000_000n);
    const res = await balance(biz.sandboxKey, customer.wallet.id, 'base');
    expect(res.body).to.include({ available: '0.000000', simulated: true });
  });

  it('answers 503 service_unavailable with Retry-After when the RPC is down', async () => {
    const down = await startApi({ env: { RPC_URL_BASE: await deadRpcUrl(), USDC_ADDRESS_BASE: token } });
    try {
      const customer = await createCustomer(down, biz.liveKey);
      const res = await down.http.get(`${BASE}/wallets/${customer.wallet.id}/balance?chain=base`).set(bearer(biz.liveKey));
      expect(res.status).to.equal(503);
      expect(res.body.error.code).to.equal('service_unavailable');
      expect(res.headers['retry-after']).to.match(/^\d+$/);
      expect(JSON.stringify(res.body)).not.to.match(/127\.0\.0\.1|ECONNREFUSED/);
    } finally {
      await down.close();
    }
  });
});
