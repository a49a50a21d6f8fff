import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey, writeHeaders, type TestBusiness } from '../helpers/factories.js';
import { BASE, createCustomer, newAccount, registerWallet } from '../helpers/wallets.js';

const CHECKSUMMED = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';

describe('wallets', () => {
  let api: ApiHarness;
  let biz: TestBusiness;
  before(async () => {
    api = await startApi();
    biz = await makeBusiness();
  });
  after(() => api.close());

  describe('POST /wallets', () => {
    it('registers an external wallet, stored and returned checksummed', async () => {
      const customer = await createCustomer(api, biz.sandboxKey);
      const account = newAccount();
      const res = await registerWallet(api, biz.sandboxKey, { address: account.address.toLowerCase(), chain: 'polygon', customer_id: customer.id, label: 'Treasury' });
      expect(res.status).to.equal(201);
      expect(res.body).to.include({
        type: 'external_wallet', chain: 'polygon', asset: 'USDC', address: account.address, ownership_status: 'unverified', status: 'active',
        customer_id: customer.id, label: 'Treasury', verified_at: null, archived_at: null,
      });
      expect(res.body.supported_chains).to.deep.equal(['polygon']);
      expect(res.body.customer_reference).to.match(/^c-/);
      const got = await api.http.get(`${BASE}/wallets/${res.body.id}`).set(bearer(biz.sandboxKey));
      expect(got.body).to.deep.equal(res.body);
    });

    it('applies EIP-55: all-lower and all-upper pass, a wrong mixed case fails', async () => {
      const business = await makeBusiness();
      const upper = await registerWallet(api, business.sandboxKey, { address: `0x${CHECKSUMMED.slice(2).toUpperCase()}`, chain: 'base' });
      expect(upper.status).to.equal(201);
      expect(upper.body.address).to.equal(CHECKSUMMED);
      const lower = await registerWallet(api, business.sandboxKey, { address: CHECKSUMMED.toLowerCase(), chain: 'arbitrum' });
      expect(lower.status).to.equal(201);
      expect(lower.body.address).to.equal(CHECKSUMMED);
      const exact = await registerWallet(api, business.sandboxKey, { address: CHECKSUMMED, chain: 'optimism' });
      expect(exact.status).to.equal(201);
      const wrong = await registerWallet(api, business.sandboxKey, { address: CHECKSUMMED.replace('aAeb', 'aaeB'), chain: 'avalanche' });
      expect(wrong.status).to.equal(400);
      expect(wrong.body.error.code).to.equal('invalid_request');
      expect(wrong.body.error.details[0].path).to.equal('address');
    });

    it('rejects malformed bodies with 400', async () => {
      const address = newAccount().address;
      for (const body of [
        { chain: 'base' },
        { address },
        { address, chain: 'solana' },
        { address: '0x1234', chain: 'base' },
        { address: `0x${'0'.repeat(40)}`, chain: 'base' },
        { address, chain: 'base', label: 'x'.repeat(121) },
        { address, chain: 'base', extra: true },
        { address, chain: 'base', customer_id: 'nope' },
      ]) {
        const res = await registerWallet(api, biz.sandboxKey, body);
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.error.code).to.equal('invalid_request');
      }
    });

    it('answers 409 wallet_already_registered with details.wallet_id for the same address and chain', async () => {
      const account = newAccount();
      const first = await registerWallet(api, biz.sandboxKey, { address: account.address, chain: 'base' });
      const again = await registerWallet(api, biz.sandboxKey, { address: account.address.toLowerCase(), chain: 'base' });
      expect(again.status).to.equal(409);
      expect(again.body.error.code).to.equal('wallet_already_registered');
      expect(again.body.error.details).to.deep.equal({ wallet_id: first.body.id });
      // Another chain is another wallet; another environment or business is another namespace.
      expect((await registerWallet(api, biz.sandboxKey, { address: account.address, chain: 'polygon' })).status).to.equal(201);
      expect((await registerWallet(api, biz.liveKey, { address: account.address, chain: 'base' })).status).to.equal(201);
      expect((await registerWallet(api, (await makeBusiness()).sandboxKey, { address: account.address, chain: 'base' })).status).to.equal(201);
    });

    it('refuses to register a managed wallet address as external, on any chain', async () => {
      const customer = await createCustomer(api, biz.sandboxKey);
      const res = await registerWallet(api, biz.sandboxKey, { address: customer.wallet.address, chain: 'avalanche' });
      expect(res.status).to.equal(409);
      expect(res.body.error.details).to.deep.equal({ wallet_id: customer.wallet.id });
    });

    it('lets exactly one of 10 concurrent registrations of one address win', async () => {
      const address = newAccount().address;
      const results = await Promise.all(Array.from({ length: 10 }, () => registerWallet(api, biz.sandboxKey, { address, chain: 'optimism' })));
      const winners = results.filter((r) => r.status === 201);
      expect(winners).to.have.length(1);
      for (const loser of results.filter((r) => r.status !== 201)) {
        expect(loser.status).to.equal(409);
        expect(loser.body.error.details.wallet_id).to.equal(winners[0].body.id);
      }
    });

    it('needs the customer to exist in this business and environment', async () => {
      const address = newAccount().address;
      const unknown = await registerWallet(api, biz.sandboxKey, { address, chain: 'base', customer_id: randomUUID() });
      expect(unknown.status).to.equal(404);
      const otherBusinessCustomer = await createCustomer(api, (await makeBusiness()).sandboxKey);
      expect((await registerWallet(api, biz.sandboxKey, { address, chain: 'base', customer_id: otherBusinessCustomer.id })).status).to.equal(404);
      const liveCustomer = await createCustomer(api, biz.liveKey);
      expect((await registerWallet(api, biz.sandboxKey, { address, chain: 'base', customer_id: liveCustomer.id })).status).to.equal(404);
    });

    it('needs wallets:write', async () => {
      const key = await makeKey(biz.businessId, { scopes: ['wallets:read'] });
      const res = await registerWallet(api, key.key, { address: newAccount().address, chain: 'base' });
      expect(res.status).to.equal(403);
      expect(res.body.error.details).to.deep.equal({ required_scope: 'wallets:write' });
    });
  });

  describe('GET /wallets/{id}', () => {
    it('shows a managed wallet with every chain and its customer', async () => {
      const customer = await createCustomer(api, biz.sandboxKey);
      const res = await api.http.get(`${BASE}/wallets/${customer.wallet.id}`).set(bearer(biz.sandboxKey));
      expect(res.status).to.equal(200);
      expect(res.body).to.include({ type: 'managed_wallet', chain: 'base', ownership_status: 'managed', status: 'active', customer_id: customer.id, address: customer.wallet.address });
      expect(res.body.supported_chains).to.deep.equal(['base', 'polygon', 'arbitrum', 'optimism', 'avalanche']);
    });

    it('answers 404 to another business and to the other environment', async () => {
      const wallet = (await registerWallet(api, biz.sandboxKey, { address: newAccount().address, chain: 'base' })).body;
      for (const key of [biz.liveKey, (await makeBusiness()).sandboxKey]) {
        const res = await api.http.get(`${BASE}/wallets/${wallet.id}`).set(bearer(key));
        expect(res.status).to.equal(404);
        expect(res.body.error.code).to.equal('not_found');
      }
    });

    it('needs wallets:read', async () => {
      const key = await makeKey(biz.businessId, { scopes: ['wallets:write'] });
      expect((await api.http.get(`${BASE}/wallets/${randomUUID()}`).set(bearer(key.key))).status).to.equal(403);
      expect((await api.http.get(`${BASE}/wallets`).set(bearer(key.key))).status).to.equal(403);
    });
  });

  describe('GET /wallets and DELETE /wallets/{id}', () => {
    it('lists active wallets, managed ones included, and drops archived ones', async () => {
      const business = await makeBusiness();
      const customer = await createCustomer(api, business.sandboxKey);
      const ext1 = (await registerWallet(api, business.sandboxKey, { address: newAccount().address, chain: 'base' })).body;
      const ext2 = (await registerWallet(api, business.sandboxKey, { address: newAccount().address, chain: 'polygon' })).body;
      await registerWallet(api, business.liveKey, { address: newAccount().address, chain: 'base' });

      const listed = await api.http.get(`${BASE}/wallets`).set(bearer(business.sandboxKey));
      expect(listed.status).to.equal(200);
      expect(listed.body.data.map((w: { id: string }) => w.id)).to.deep.equal([ext2.id, ext1.id, customer.wallet.id]);

      const archived = await api.http.delete(`${BASE}/wallets/${ext2.id}`).set(writeHeaders(business.sandboxKey));
      expect(archived.status).to.equal(200);
      expect(archived.body.status).to.equal('archived');
      expect(Date.parse(archived.body.archived_at)).to.be.closeTo(Date.now(), 60_000);

      const after = await api.http.get(`${BASE}/wallets`).set(bearer(business.sandboxKey));
      expect(after.body.data.map((w: { id: string }) => w.id)).to.deep.equal([ext1.id, customer.wallet.id]);
      // Still readable, and archiving again changes nothing.
      const got = await api.http.get(`${BASE}/wallets/${ext2.id}`).set(bearer(business.sandboxKey));
      expect(got.body).to.deep.equal(archived.body);
      const again = await api.http.delete(`${BASE}/wallets/${ext2.id}`).set(writeHeaders(business.sandboxKey));
      expect(again.body.archived_at).to.equal(archived.body.archived_at);
      // Once archived, the address can be registered again.
      expect((await registerWallet(api, business.sandboxKey, { address: ext2.address, chain: 'polygon' })).status).to.equal(201);
    });

    it('pages with a cursor and filters by customer and type', async () => {
      const business = await makeBusiness();
      const customer = await createCustomer(api, business.sandboxKey);
      const ids = [customer.wallet.id];
      for (let i = 0; i < 4; i += 1) ids.unshift((await registerWallet(api, business.sandboxKey, { address: newAccount().address, chain: 'base', customer_id: i % 2 ? customer.id : undefined })).body.id);
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const res: { status: number; body: { data: { id: string }[]; next_cursor: string | null } } = await api.http.get(`${BASE}/wallets`).query({ limit: 2, ...(cursor ? { starting_after: cursor } : {}) }).set(bearer(business.sandboxKey));
        expect(res.status).to.equal(200);
        seen.push(...res.body.data.map((w) => w.id));
        cursor = res.body.next_cursor;
      } while (cursor);
      expect(seen).to.deep.equal(ids);
      const ofCustomer = await api.http.get(`${BASE}/wallets?customer_id=${customer.id}`).set(bearer(business.sandboxKey));
      expect(ofCustomer.body.data).to.have.length(3);
      const managed = await api.http.get(`${BASE}/wallets?type=managed_wallet`).set(bearer(business.sandboxKey));
      expect(managed.body.data.map((w: { id: string }) => w.id)).to.deep.equal([customer.wallet.id]);
    });

    it('answers 404 to DELETE from another business or environment, and leaves the wallet alone', async () => {
      const wallet = (await registerWallet(api, biz.sandboxKey, { address: newAccount().address, chain: 'base' })).body;
      for (const key of [biz.liveKey, (await makeBusiness()).sandboxKey]) {
        expect((await api.http.delete(`${BASE}/wallets/${wallet.id}`).set(writeHeaders(key))).status).to.equal(404);
      }
      expect((await api.http.get(`${BASE}/wallets/${wallet.id}`).set(bearer(biz.sandboxKey))).body.status).to.equal('active');
    });

    it('needs wallets:write to archive', async () => {
      const key = await makeKey(biz.businessId, { scopes: ['wallets:read'] });
      const wallet = (await registerWallet(api, biz.sandboxKey, { address: newAccount().address, chain: 'base' })).body;
      const res = await api.http.delete(`${BASE}/wallets/${wallet.id}`).set(writeHeaders(key.key));
      expect(res.status).to.equal(403);
    });
  });
});

describe('a customer\'s managed wallet', () => {
  let api: ApiHarness;
  before(async () => {
    api = await startApi();
  });
  after(() => api.close());

  it('cannot be archived on its own (409 invalid_state) and stays active', async () => {
    const biz = await makeBusiness();
    const customer = await createCustomer(api, biz.sandboxKey);
    const res = await api.http.delete(`${BASE}/wallets/${customer.wallet.id}`).set(writeHeaders(biz.sandboxKey));
    expect(res.status).to.equal(409);
    expect(res.body.error.code).to.equal('invalid_state');
    const got = await api.http.get(`${BASE}/wallets/${customer.wallet.id}`).set(bearer(biz.sandboxKey));
    expect(got.body.status).to.equal('active');
  });
});
