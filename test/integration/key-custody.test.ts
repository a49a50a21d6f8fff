import { expect } from 'chai';
import supertest from 'supertest';
import { mnemonicToAccount } from 'viem/accounts';
import { getConfig } from '../../shared/config.js';
import type { ApiHarness } from '../helpers/harness.js';
import { makeBusiness, writeHeaders, type TestBusiness } from '../helpers/factories.js';
import { startProcess, stopProcess, type Started } from '../helpers/processes.js';
import { fund, kesBeneficiary, offramp, quote } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { BASE, createCustomer, walletKeyEnv } from '../helpers/wallets.js';
import { startPools, type RunningPools } from '../helpers/workers.js';

// Section 15: the web process derives every address from the xpubs; the seeds are not in its environment at all.
describe('a web process with no seed in its environment', function () {
  this.timeout(90_000);
  let web: Started;
  let pools: RunningPools;
  let api: ApiHarness;
  let biz: TestBusiness;
  const seeds = () => getConfig().walletSeeds!;

  before(async () => {
    const port = String(23000 + (process.pid % 20000));
    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('WALLET_'))) as Record<string, string>;
    web = await startProcess('api/main.ts', {
      ...env, ...walletKeyEnv(seeds().sandbox, 'sandbox'), ...walletKeyEnv(seeds().live!, 'live'), PORT: port, LOG_LEVEL: 'info',
    }, 'web listening');
    // The pricing pool answers its quotes (this process's, which holds the seeds like the settlement pool's would).
    pools = await startPools(['pricing']);
    api = { http: supertest(`http://127.0.0.1:${port}`) } as unknown as ApiHarness;
    biz = await makeBusiness();
  });
  after(async () => {
    await pools?.close();
    if (web) await stopProcess(web);
  });

  /** The HD index stored with the row, and the address the seed derives at it (m/44'/60'/0'/0/i). */
  async function seedAddress(table: 'wallets' | 'payment_intents' | 'settlements', id: string, seed: string): Promise<string> {
    const [{ hd_index }] = await (await getDs()).query(`SELECT hd_index FROM ${table} WHERE id = $1`, [id]);
    return mnemonicToAccount(seed, { addressIndex: hd_index }).address;
  }

  it('creates sandbox and live customers whose managed wallets are the seeds\' addresses', async () => {
    const sandbox = await createCustomer(api, biz.sandboxKey);
    expect(sandbox.wallet.address).to.equal(await seedAddress('wallets', sandbox.wallet.id, seeds().sandbox));
    const live = await createCustomer(api, biz.liveKey);
    expect(live.wallet.address).to.equal(await seedAddress('wallets', live.wallet.id, seeds().live!));
  });

  it('creates a payment intent whose deposit address is the seed\'s', async () => {
    const res = await api.http.post(`${BASE}/payment-intents`).set(writeHeaders(biz.sandboxKey))
      .send({ amount: { currency: 'KES', value: '1500.00' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.payment_instructions.address).to.equal(await seedAddress('payment_intents', res.body.id, seeds().sandbox));
  });

  it('creates an off-ramp whose settlement deposit address is the seed\'s, its fee address the seed\'s treasury', async () => {
    const customer = await createCustomer(api, biz.sandboxKey);
    await fund(api, biz.sandboxKey, customer.wallet.id, '50');
    const q = await quote(api, biz.sandboxKey, { direction: 'offramp', source_amount: '20', beneficiary_id: await kesBeneficiary(api, biz.sandboxKey) });
    const res = await offramp(api, biz.sandboxKey, q.id, customer.wallet.id);
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const settlement = res.body.settlement;
    expect(settlement.to_address).to.equal(await seedAddress('settlements', settlement.id, seeds().sandbox));
    const [{ fee_address }] = await (await getDs()).query(`SELECT fee_address FROM settlements WHERE id = $1`, [settlement.id]);
    expect(fee_address).to.equal(mnemonicToAccount(seeds().sandbox, { path: "m/44'/60'/1'/0/0" }).address);
  });
});
