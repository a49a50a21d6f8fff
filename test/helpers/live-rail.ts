// A live environment on our fake Daraja and fake rate source: the API listening on a port (Daraja's callbacks reach
// it over HTTP), the pricing, settlement and providers pools, and the sandbox chain adapter standing in for the live
// chain (RAMPWAY_TEST_LIVE_CHAIN), with a live-enabled business.
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { httpServer } from '../../api/http-server.js';
import { enableLive } from '../../shared/admin/commands.js';
import { getConfig } from '../../shared/config.js';
import { fundSandboxWallet } from '../../shared/domain/wallet-balances.js';
import { forgetDarajaTokens } from '../../shared/providers/daraja/daraja-client.js';
import { startApi, type ApiHarness } from './harness.js';
import { makeBusiness, writeHeaders, type TestBusiness } from './factories.js';
import { getDs } from './shared.js';
import { startPools, type RunningPools } from './workers.js';
import type { Pool } from '../../shared/queues/registry.js';
import { BASE, createCustomer } from './wallets.js';
import { darajaEnv, startFakeDaraja, startFakeRates, type FakeDaraja } from './fake-daraja.js';

export const CALLBACK_TOKEN = `cbtok_${randomUUID().replace(/-/g, '')}`;

export interface LiveRail {
  api: ApiHarness;
  apiUrl: string;
  fake: FakeDaraja;
  rates: Awaited<ReturnType<typeof startFakeRates>>;
  env: Record<string, string>;
  biz: TestBusiness;
  key: string;
  pools: RunningPools;
  close(): Promise<void>;
}

export async function startLiveRail(options: { pools?: Pool[]; env?: Record<string, string> } = {}): Promise<LiveRail> {
  forgetDarajaTokens();
  const [fake, rates] = await Promise.all([startFakeDaraja(), startFakeRates()]);
  const env: Record<string, string> = {
    ...darajaEnv(fake, 'https://rampway.example', CALLBACK_TOKEN), RATE_SOURCE_URL: rates.url, RAMPWAY_TEST_LIVE_CHAIN: 'sandbox',
    DARAJA_STATUS_QUERY_AFTER_MS: '400', QUOTE_WAIT_MS: '5000', ...options.env,
  };
  const api = await startApi({ env });
  const server = httpServer(api.app, api.deps.log);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.callbackOrigin = apiUrl;
  const pools = await startPools(options.pools ?? ['pricing', 'settlement', 'providers'], { env });
  const biz = await makeBusiness();
  await enableLive({ ds: await getDs(), config: getConfig() }, { businessId: biz.businessId });
  return {
    api, apiUrl, fake, rates, env, biz, key: biz.liveKey, pools,
    async close() {
      await pools.close();
      await new Promise((resolve) => server.close(resolve));
      await api.close();
      await Promise.all([fake.close(), rates.close()]);
    },
  };
}

/** A live managed wallet holding `amount` USDC (credited in the ledger, as the sandbox chain keeps it). */
export async function fundedLiveWallet(rail: LiveRail, amount: string): Promise<string> {
  const customer = await createCustomer(rail.api, rail.key);
  if (amount !== '0') {
    await (await getDs()).transaction((em) => fundSandboxWallet(em, getConfig(), { businessId: rail.biz.businessId, environment: 'live' }, customer.wallet.id, { chain: 'base', amount }));
  }
  return customer.wallet.id;
}

export async function liveBeneficiary(rail: LiveRail, paymentMethod: 'mobile_money' | 'paybill' | 'buy_goods', details: Record<string, string>): Promise<string> {
  const res = await rail.api.http.post(`${BASE}/beneficiaries`).set(writeHeaders(rail.key)).send({ currency: 'KES', payment_method: paymentMethod, account_holder_name: 'Amina W', details });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return res.body.id;
}
