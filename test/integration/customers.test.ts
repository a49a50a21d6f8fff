import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey, writeHeaders, type TestBusiness } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { refillAddressPool } from '../../shared/chain/address-pool.js';
import { getConfig } from '../../shared/config.js';
import { mnemonicToAccount } from 'viem/accounts';
import { managedWalletAddress } from '../../shared/chain/hd-wallet.js';

const BASE = '/api/v1/business/customers';
const ALL_CHAINS = ['base', 'polygon', 'arbitrum', 'optimism', 'avalanche'];

describe('customers', () => {
  let api: ApiHarness;
  let biz: TestBusiness;
  before(async () => {
    api = await startApi();
    biz = await makeBusiness();
  });
  after(() => api.close());

  const create = (key: string, body: object, idem?: string) => api.http.post(BASE).set(writeHeaders(key, idem)).send(body);

  async function hdIndexOf(walletId: string): Promise<{ hd_index: number; environment: 'sandbox' | 'live' }> {
    const rows = await (await getDs()).query(`SELECT hd_index, environment FROM wallets WHERE id = $1`, [walletId]);
    return rows[0];
  }

  describe('POST /customers', () => {
    it('creates a customer with one managed wallet derived from the environment seed', async () => {
      const res = await create(biz.sandboxKey, { external_reference: 'cust-1', display_name: 'Ada', metadata: { tier: 'gold' } });
      expect(res.status).to.equal(201);
      expect(res.body).to.include({ external_reference: 'cust-1', display_name: 'Ada', status: 'active', archived_at: null });
      expect(res.body.metadata).to.deep.equal({ tier: 'gold' });
      expect(res.body.created_at).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const wallet = res.body.wallet;
      expect(wallet).to.include({ type: 'managed_wallet', asset: 'USDC', ownership_status: 'managed', status: 'active' });
      expect(wallet.supported_chains).to.deep.equal(ALL_CHAINS);
      const { hd_index, environment } = await hdIndexOf(wallet.id);
      expect(environment).to.equal('sandbox');
      expect(wallet.address).to.equal(mnemonicToAccount(getConfig().walletSeeds!.sandbox, { addressIndex: hd_index }).address);
      // Nothing that looks like a private key or a seed leaves the service.
      const text = JSON.stringify(res.body);
      expect(text).not.to.match(/[0-9a-fA-F]{64}/);
      expect(text).not.to.contain(getConfig().walletSeeds!.sandbox.split(' ')[0] + ' ');
    });

    it('returns the existing customer (200) for a reused external_reference, without a second wallet', async () => {
      const ref = `reuse-${randomUUID()}`;
      const first = await create(biz.sandboxKey, { external_reference: ref, display_name: 'First' });
      const second = await create(biz.sandboxKey, { external_reference: ref, display_name: 'Second' });
      expect(first.status).to.equal(201);
      expect(second.status).to.equal(200);
      expect(second.body.id).to.equal(first.body.id);
      expect(second.body.wallet).to.deep.equal(first.body.wallet);
      expect(second.body.display_name).to.equal('First');
      const count = await (await getDs()).query(`SELECT count(*)::int AS n FROM wallets WHERE customer_id = $1`, [first.body.id]);
      expect(count[0].n).to.equal(1);
    });

    it('creates one customer and one wallet under 20 concurrent creates of the same reference', async () => {
      const ref = `race-${randomUUID()}`;
      const results = await Promise.all(Array.from({ length: 20 }, () => create(biz.sandboxKey, { external_reference: ref })));
      const statuses = results.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 201)).to.have.length(1);
      expect(statuses.filter((s) => s === 200)).to.have.length(19);
      expect(new Set(results.map((r) => r.body.id)).size).to.equal(1);
      expect(new Set(results.map((r) => r.body.wallet.address)).size).to.equal(1);
      const rows = await (await getDs()).query(
        `SELECT count(DISTINCT c.id)::int AS customers, count(w.id)::int AS wallets FROM customers c JOIN wallets w ON w.customer_id = c.id
          WHERE c.business_id = $1 AND c.external_reference = $2`,
        [biz.businessId, ref],
      );
      expect(rows[0]).to.deep.equal({ customers: 1, wallets: 1 });
    });

    it('skips an HD index whose address this business already registered as an external wallet (any chain)', async () => {
      const ds = await getDs();
      const own = await makeBusiness();
      const { xpub } = getConfig().wallets.sandbox;
      // The next addresses a create claims: the pool's oldest (section 15).
      await ds.query(`DELETE FROM hd_address_pool`);
      await refillAddressPool(ds, 'sandbox', xpub, 3);
      const pooled: { hd_index: number; address: string }[] = await ds.query(`SELECT hd_index, address FROM hd_address_pool ORDER BY hd_index`);
      // The sandbox seed is public: someone can register the next managed addresses before the platform derives them.
      for (const [offset, chain] of [[0, 'base'], [1, 'polygon']] as const) {
        const res = await api.http.post('/api/v1/business/wallets').set(writeHeaders(own.sandboxKey)).send({ address: pooled[offset].address, chain });
        expect(res.status, res.text).to.equal(201);
      }
      const res = await create(own.sandboxKey, { external_reference: `skip-${randomUUID()}` });
      expect(res.status, res.text).to.equal(201);
      const [{ hd_index: index }] = await ds.query(`SELECT hd_index FROM wallets WHERE id = $1`, [res.body.wallet.id]);
      expect(index).to.equal(pooled[2].hd_index);
      expect(res.body.wallet.address).to.equal(managedWalletAddress(xpub, index));
      const holders = await ds.query(`SELECT count(*)::int AS n FROM wallets WHERE business_id = $1 AND lower(address) = lower($2)`, [own.businessId, res.body.wallet.address]);
      expect(holders[0].n).to.equal(1);
    });

    it('gives every customer its own address', async () => {
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => create(biz.sandboxKey, { external_reference: `distinct-${i}-${randomUUID()}` })));
      expect(results.every((r) => r.status === 201)).to.equal(true);
      expect(new Set(results.map((r) => r.body.wallet.address)).size).to.equal(10);
    });

    it('keeps sandbox and live apart and derives live wallets from the live seed', async () => {
      const ref = `env-${randomUUID()}`;
      const sandbox = await create(biz.sandboxKey, { external_reference: ref });
      const live = await create(biz.liveKey, { external_reference: ref });
      expect(sandbox.status).to.equal(201);
      expect(live.status).to.equal(201);
      expect(live.body.id).not.to.equal(sandbox.body.id);
      const { hd_index, environment } = await hdIndexOf(live.body.wallet.id);
      expect(environment).to.equal('live');
      expect(live.body.wallet.address).to.equal(mnemonicToAccount(getConfig().walletSeeds!.live!, { addressIndex: hd_index }).address);
      expect(live.body.wallet.address).not.to.equal(mnemonicToAccount(getConfig().walletSeeds!.sandbox, { addressIndex: hd_index }).address);
    });

    it('rejects bad bodies with 400 invalid_request', async () => {
      const cases: object[] = [
        {},
        { external_reference: '' },
        { external_reference: 'x'.repeat(129) },
        { external_reference: 'ok', unknown_field: 1 },
        { external_reference: 'ok', display_name: '' },
        { external_reference: 'ok', metadata: { a: 1 } },
        { external_reference: 'ok', metadata: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v'])) },
        { external_reference: 'ok', metadata: { k: 'v'.repeat(501) } },
        { external_reference: 42 },
      ];
      for (const body of cases) {
        const res = await create(biz.sandboxKey, body);
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.error.code).to.equal('invalid_request');
      }
    });

    it('needs customers:write', async () => {
      const key = await makeKey(biz.businessId, { scopes: ['customers:read'] });
      const res = await create(key.key, { external_reference: `scope-${randomUUID()}` });
      expect(res.status).to.equal(403);
      expect(res.body.error).to.include({ code: 'insufficient_scope' });
      expect(res.body.error.details).to.deep.equal({ required_scope: 'customers:write' });
    });
  });

  describe('GET /customers/{id}', () => {
    it('returns the customer to its business and environment only', async () => {
      const created = await create(biz.sandboxKey, { external_reference: `get-${randomUUID()}` });
      const own = await api.http.get(`${BASE}/${created.body.id}`).set(bearer(biz.sandboxKey));
      expect(own.status).to.equal(200);
      expect(own.body).to.deep.equal(created.body);

      const other = await makeBusiness();
      for (const key of [other.sandboxKey, biz.liveKey]) {
        const res = await api.http.get(`${BASE}/${created.body.id}`).set(bearer(key));
        expect(res.status).to.equal(404);
        expect(res.body.error.code).to.equal('not_found');
      }
    });

    it('answers 404 for an unknown id and 400 for a malformed one', async () => {
      expect((await api.http.get(`${BASE}/${randomUUID()}`).set(bearer(biz.sandboxKey))).status).to.equal(404);
      expect((await api.http.get(`${BASE}/not-a-uuid`).set(bearer(biz.sandboxKey))).status).to.equal(400);
    });

    it('needs customers:read', async () => {
      const key = await makeKey(biz.businessId, { scopes: ['customers:write'] });
      const res = await api.http.get(`${BASE}/${randomUUID()}`).set(bearer(key.key));
      expect(res.status).to.equal(403);
      expect(res.body.error.details).to.deep.equal({ required_scope: 'customers:read' });
    });
  });

  describe('GET /customers', () => {
    let lister: TestBusiness;
    const ids: string[] = [];
    before(async () => {
      lister = await makeBusiness();
      for (let i = 0; i < 5; i += 1) {
        const res = await create(lister.sandboxKey, { external_reference: `list-${i}` });
        ids.unshift(res.body.id); // newest first
      }
      await create(lister.liveKey, { external_reference: 'list-live-only' });
    });

    it('pages newest first with a cursor', async () => {
      const first = await api.http.get(`${BASE}?limit=2`).set(bearer(lister.sandboxKey));
      expect(first.status).to.equal(200);
      expect(first.body.data.map((c: { id: string }) => c.id)).to.deep.equal(ids.slice(0, 2));
      expect(first.body.has_more).to.equal(true);
      const seen = [...first.body.data];
      let cursor = first.body.next_cursor;
      while (cursor) {
        const page = await api.http.get(`${BASE}?limit=2&starting_after=${encodeURIComponent(cursor)}`).set(bearer(lister.sandboxKey));
        expect(page.status).to.equal(200);
        seen.push(...page.body.data);
        cursor = page.body.next_cursor;
        if (!page.body.has_more) expect(cursor).to.equal(null);
      }
      expect(seen.map((c) => c.id)).to.deep.equal(ids);
      expect(seen[0].wallet.type).to.equal('managed_wallet');
    });

    it('filters by external_reference and stays inside the environment', async () => {
      const one = await api.http.get(`${BASE}?external_reference=list-3`).set(bearer(lister.sandboxKey));
      expect(one.body.data).to.have.length(1);
      expect(one.body.data[0].external_reference).to.equal('list-3');
      const live = await api.http.get(BASE).set(bearer(lister.liveKey));
      expect(live.body.data.map((c: { external_reference: string }) => c.external_reference)).to.deep.equal(['list-live-only']);
      const none = await api.http.get(`${BASE}?external_reference=list-live-only`).set(bearer(lister.sandboxKey));
      expect(none.body).to.deep.equal({ data: [], has_more: false, next_cursor: null });
    });

    it('does not show another business its customers', async () => {
      const other = await makeBusiness();
      const res = await api.http.get(BASE).set(bearer(other.sandboxKey));
      expect(res.body.data).to.deep.equal([]);
    });

    it('rejects a bad limit or cursor with 400', async () => {
      for (const qs of ['limit=0', 'limit=101', 'limit=abc', 'starting_after=garbage', 'unknown=1']) {
        const res = await api.http.get(`${BASE}?${qs}`).set(bearer(lister.sandboxKey));
        expect(res.status, qs).to.equal(400);
        expect(res.body.error.code).to.equal('invalid_request');
      }
    });
  });
});

describe('live secrets are never the built-in development ones', () => {
  it('without WALLET_XPUB_LIVE, live customers answer 503 and sandbox ones still work', async () => {
    const api = await startApi({ env: { WALLET_XPUB_LIVE: '', WALLET_TREASURY_ADDRESS_LIVE: '' } });
    try {
      const biz = await makeBusiness();
      const live = await api.http.post('/api/v1/business/customers').set(writeHeaders(biz.liveKey)).send({ external_reference: 'no-seed' });
      expect(live.status).to.equal(503);
      expect(live.body.error.code).to.equal('service_unavailable');
      expect(live.body.error.message).to.match(/WALLET_XPUB_LIVE/);
      expect(Number(live.headers['retry-after'])).to.be.at.least(1);
      const sandbox = await api.http.post('/api/v1/business/customers').set(writeHeaders(biz.sandboxKey)).send({ external_reference: 'no-seed' });
      expect(sandbox.status).to.equal(201);
    } finally {
      await api.close();
    }
  });
});
