import { expect } from 'chai';
import { mnemonicToAccount } from 'viem/accounts';
import { claimAddress, refillAddressPool, xpubId } from '../../shared/chain/address-pool.js';
import { managedWalletAddress } from '../../shared/chain/hd-wallet.js';
import { getConfig } from '../../shared/config.js';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { makeBusiness, writeHeaders, type TestBusiness } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { until } from '../helpers/until.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { startPools } from '../helpers/workers.js';
import { fund, kesBeneficiary, offramp, quote } from '../helpers/ramps.js';
import { erc20TransferData } from '../../shared/domain/settlements.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import type { Address } from 'viem';

// Section 15 / issue 24: addresses are derived ahead of need by a worker; a create claims one, so the request path
// does no elliptic-curve work. An empty pool is not an error: the create derives its own.
describe('the pool of pre-derived addresses', function () {
  this.timeout(60_000);
  let api: ApiHarness;
  let biz: TestBusiness;
  const sandboxXpub = () => getConfig().wallets.sandbox.xpub;
  const pooled = async (environment = 'sandbox'): Promise<{ hd_index: number; address: string }[]> =>
    (await getDs()).query(`SELECT hd_index, address FROM hd_address_pool WHERE environment = $1 AND xpub_id = $2 ORDER BY hd_index`, [environment, xpubId(sandboxXpub())]);

  before(async () => {
    api = await startApi();
    biz = await makeBusiness();
  });
  after(async () => api?.close());
  beforeEach(async () => (await getDs()).query(`DELETE FROM hd_address_pool`));

  it('a refill derives up to the size asked, each address the one the seed has at its index, and no more on a second refill', async () => {
    expect(await refillAddressPool(await getDs(), 'sandbox', sandboxXpub(), 25)).to.equal(25);
    expect(await refillAddressPool(await getDs(), 'sandbox', sandboxXpub(), 25)).to.equal(0);
    const rows = await pooled();
    expect(rows).to.have.length(25);
    for (const row of rows.slice(0, 3)) {
      expect(row.address).to.equal(mnemonicToAccount(getConfig().walletSeeds!.sandbox, { addressIndex: row.hd_index }).address);
    }
  });

  it('a customer\'s managed wallet and a payment intent\'s deposit address are claimed from the pool, oldest first', async () => {
    // The pricing pool gives the intent its rate; it keeps no pool of its own here.
    const pricing = await startPools(['pricing'], { env: { ADDRESS_POOL_SIZE: '0' } });
    try {
      await refillAddressPool(await getDs(), 'sandbox', sandboxXpub(), 5);
      const before = await pooled();
      const customer = await createCustomer(api, biz.sandboxKey);
      expect(customer.wallet.address).to.equal(before[0].address);
      const intent = await api.http.post(`${BASE}/payment-intents`).set(writeHeaders(biz.sandboxKey))
        .send({ amount: { currency: 'KES', value: '1500.00' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
      expect(intent.status, JSON.stringify(intent.body)).to.equal(201);
      expect(intent.body.payment_instructions.address).to.equal(before[1].address);
      const [{ hd_index }] = await (await getDs()).query(`SELECT hd_index FROM payment_intents WHERE id = $1`, [intent.body.id]);
      expect(hd_index).to.equal(before[1].hd_index);
      expect((await pooled()).map((r) => r.address)).to.deep.equal(before.slice(2).map((r) => r.address));
    } finally {
      await pricing.close();
    }
  });

  it('an off-ramp\'s deposit address is claimed by its settlement\'s own insert, with the transfer viem encodes; an empty pool derives one', async () => {
    const pricing = await startPools(['pricing'], { env: { ADDRESS_POOL_SIZE: '0' } });
    try {
      const key = biz.sandboxKey;
      const beneficiary = await kesBeneficiary(api, key);
      const customer = await createCustomer(api, key);
      await fund(api, key, customer.wallet.id, '50');
      const start = async () => {
        const q = await quote(api, key, { direction: 'offramp', source_amount: '10', beneficiary_id: beneficiary });
        const res = await offramp(api, key, q.id, customer.wallet.id);
        expect(res.status, JSON.stringify(res.body)).to.equal(201);
        const [row]: { to_address: string; hd_index: number; total_required: string }[] = await (await getDs()).query(
          `SELECT to_address, hd_index, total_required::text FROM settlements WHERE transaction_id = $1`, [res.body.id]);
        expect(res.body.settlement.execution).to.deep.equal({
          method: 'erc20_transfer', to: res.body.settlement.token_address, value: '0', data: erc20TransferData(row.to_address as Address, toMinor(row.total_required, USDC_SCALE)),
        });
        return row;
      };
      await refillAddressPool(await getDs(), 'sandbox', sandboxXpub(), 2);
      const before = await pooled();
      const fromPool = await start();
      expect(fromPool).to.deep.include({ to_address: before[0].address, hd_index: before[0].hd_index });
      expect((await pooled()).map((r) => r.hd_index)).to.deep.equal([before[1].hd_index]);
      await (await getDs()).query(`DELETE FROM hd_address_pool`);
      const derived = await start();
      expect(derived.to_address).to.equal(managedWalletAddress(sandboxXpub(), derived.hd_index));
      expect(derived.hd_index).to.not.equal(fromPool.hd_index);
    } finally {
      await pricing.close();
    }
  });

  it('concurrent creates each claim a different address; when the pool runs dry the rest derive their own', async () => {
    await refillAddressPool(await getDs(), 'sandbox', sandboxXpub(), 6);
    const fromPool = new Set((await pooled()).map((r) => r.address));
    const customers = await Promise.all(Array.from({ length: 12 }, () => createCustomer(api, biz.sandboxKey)));
    const addresses = customers.map((c) => c.wallet.address);
    expect(new Set(addresses).size).to.equal(12);
    expect(addresses.filter((a) => fromPool.has(a))).to.have.length(6);
    expect(await pooled()).to.have.length(0);
    const rows: { address: string; hd_index: number }[] = await (await getDs()).query(
      `SELECT address, hd_index FROM wallets WHERE id = ANY($1)`, [customers.map((c) => c.wallet.id)]);
    for (const row of rows) expect(row.address).to.equal(managedWalletAddress(sandboxXpub(), row.hd_index));
  });

  it('addresses of a key no longer configured are never handed out, and a refill removes them', async () => {
    const other = mnemonicToAccount('legal winner thank year wave sausage worth useful legal winner thank yellow').address;
    await (await getDs()).query(
      `INSERT INTO hd_address_pool (hd_index, environment, xpub_id, address) VALUES (nextval('hd_address_index'), 'sandbox', 'not-this-key', $1)`, [other]);
    const claimed = await (await getDs()).transaction((em) => claimAddress(em, 'sandbox', sandboxXpub()));
    expect(claimed.address).to.not.equal(other);
    expect(claimed.address).to.equal(managedWalletAddress(sandboxXpub(), claimed.index));
    await refillAddressPool(await getDs(), 'sandbox', sandboxXpub(), 1);
    const left: unknown[] = await (await getDs()).query(`SELECT 1 FROM hd_address_pool WHERE xpub_id = 'not-this-key'`);
    expect(left).to.have.length(0);
  });

  it('a create that rolls back leaves its claimed address in the pool', async () => {
    await refillAddressPool(await getDs(), 'sandbox', sandboxXpub(), 2);
    await (await getDs()).transaction(async (em) => {
      await claimAddress(em, 'sandbox', sandboxXpub());
      throw new Error('rolled back');
    }).catch(() => undefined);
    expect(await pooled()).to.have.length(2);
  });

  it('a claim starts past the last one this process made (the claimed entries before it are dead until VACUUM); a row a rolled-back create left behind is still handed out', async () => {
    const ds = await getDs();
    await refillAddressPool(ds, 'sandbox', sandboxXpub(), 40);
    const rows = await pooled();
    const claim = () => ds.transaction((em) => claimAddress(em, 'sandbox', sandboxXpub()));
    for (let i = 0; i < 30; i++) await claim();
    // The first row back in the pool, as a create that claimed it and rolled back late would leave it.
    await ds.query(`INSERT INTO hd_address_pool (hd_index, environment, xpub_id, address) VALUES ($1, 'sandbox', $2, $3)`, [rows[0].hd_index, xpubId(sandboxXpub()), rows[0].address]);
    // Not read from the start of the index: the next one past the last claim.
    expect((await claim()).index).to.equal(rows[30].hd_index);
    // Once nothing is left past it (or on a periodic full scan), the row behind is handed out too.
    const later: number[] = [];
    for (let i = 0; i < 10; i++) later.push((await claim()).index);
    expect(later).to.include(rows[0].hd_index);
    expect(new Set(later).size).to.equal(10);
    expect(await pooled()).to.deep.equal([]);
  });

  it('the pricing pool keeps ADDRESS_POOL_SIZE addresses derived for each configured environment', async () => {
    const pools = await startPools(['pricing'], { env: { ADDRESS_POOL_SIZE: '30' } });
    try {
      await until(async () => (await pooled('sandbox')).length === 30, { what: 'the sandbox pool filled', timeoutMs: 20_000 });
      const live: { n: number }[] = await (await getDs()).query(
        `SELECT count(*)::int AS n FROM hd_address_pool WHERE environment = 'live' AND xpub_id = $1`, [xpubId(getConfig().wallets.live!.xpub)]);
      await until(async () => ((await (await getDs()).query(
        `SELECT count(*)::int AS n FROM hd_address_pool WHERE environment = 'live' AND xpub_id = $1`, [xpubId(getConfig().wallets.live!.xpub)]))[0].n === 30),
      { what: `the live pool filled (had ${live[0].n})`, timeoutMs: 20_000 });
      await createCustomer(api, biz.sandboxKey);
      await until(async () => (await pooled('sandbox')).length === 30, { what: 'the sandbox pool topped up after a claim', timeoutMs: 10_000 });
    } finally {
      await pools.close();
    }
  });
});
