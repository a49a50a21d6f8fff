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
import { makeBusiness, makeKey, writeHeaders, type TestBusiness } from './factories.js';
import { deployTestUsdc, mintUsdc, startAnvil, type Anvil } from './chain.js';
import { treasuryAddress } from '../../shared/chain/hd-wallet.js';
import { erc20Abi, getAddress, parseEther, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { getDs } from './shared.js';
import { offramp, quote } from './ramps.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { startPools, type RunningPools } from './workers.js';
import type { Pool } from '../../shared/queues/registry.js';
import { BASE, createCustomer } from './wallets.js';
import { darajaEnv, startFakeDaraja, startFakeRates, type FakeDaraja } from './fake-daraja.js';
import { momoEnv, startFakeMomo, type FakeMomo } from './fake-momo.js';
import { forgetMomoTokens } from '../../shared/providers/momo/momo-client.js';

export const CALLBACK_TOKEN = `cbtok_${randomUUID().replace(/-/g, '')}`;
/**
 * Tests of an answer that comes too late: our requests to Daraja give up after ANSWER_TIMEOUT_MS, and the stand-in holds
 * such an answer LATE_ANSWER_MS. The budget leaves room for a first request on a busy two-core CI machine (a 300 ms
 * budget once timed out an ordinary STK Push there, and its 1037 callback then named a prompt we did not know).
 */
export const ANSWER_TIMEOUT_MS = 1500;
export const LATE_ANSWER_MS = 3500;
export const MOMO_CALLBACK_TOKEN = `momotok_${randomUUID().replace(/-/g, '')}`;

export interface LiveRail {
  api: ApiHarness;
  apiUrl: string;
  fake: FakeDaraja;
  /** The MTN MoMo stand-in, when the rail was started with `momo` (MOMO_CURRENCIES=UGX). */
  momo: FakeMomo | null;
  rates: Awaited<ReturnType<typeof startFakeRates>>;
  env: Record<string, string>;
  biz: TestBusiness;
  key: string;
  pools: RunningPools;
  close(): Promise<void>;
}

export async function startLiveRail(options: { pools?: Pool[]; env?: Record<string, string>; momo?: boolean } = {}): Promise<LiveRail> {
  forgetDarajaTokens();
  forgetMomoTokens();
  const [fake, rates, momo] = await Promise.all([startFakeDaraja(), startFakeRates(), options.momo ? startFakeMomo() : null]);
  const env: Record<string, string> = {
    ...darajaEnv(fake, 'https://rampway.example', CALLBACK_TOKEN), ...(momo ? momoEnv(momo, 'https://rampway.example', MOMO_CALLBACK_TOKEN) : {}),
    RATE_SOURCE_URL: rates.url, RAMPWAY_TEST_LIVE_CHAIN: 'sandbox',
    DARAJA_STATUS_QUERY_AFTER_MS: '400', QUOTE_WAIT_MS: '5000', ...options.env,
  };
  const api = await startApi({ env });
  const server = httpServer(api.app, api.deps.log);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.callbackOrigin = apiUrl;
  if (momo) momo.callbackOrigin = apiUrl;
  const pools = await startPools(options.pools ?? ['pricing', 'settlement', 'providers'], { env });
  const biz = await makeBusiness();
  await enableLive({ ds: await getDs(), config: getConfig() }, { businessId: biz.businessId });
  return {
    // A key of its own, whose rate limit the tests' polling (every 20 ms, a describe's tests in turn) never meets.
    api, apiUrl, fake, momo, rates, env, biz, key: (await makeKey(biz.businessId, { environment: 'live', rateLimit: 1_000_000 })).key, pools,
    async close() {
      await pools.close();
      await new Promise((resolve) => server.close(resolve));
      await api.close();
      await Promise.all([fake.close(), rates.close(), momo?.close()]);
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

/** A live on-ramp of 1500 KES paid by `phone` (the fake reads its scenario from the last four digits). */
export async function liveOnramp(rail: LiveRail, phone: string): Promise<string> {
  const walletId = await fundedLiveWallet(rail, '0');
  const q = await quote(rail.api, rail.key, { direction: 'onramp', source_amount: '1500', wallet_id: walletId });
  const res = await rail.api.http.post(`${BASE}/onramps`).set(writeHeaders(rail.key)).send({ quote_id: q.id, payment_method: { type: 'mobile_money', phone_number: phone, mobile_network: 'safaricom' } });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return res.body.id;
}

/** A live off-ramp of 20 USDC from a managed wallet holding 100, to a new beneficiary. */
export async function livePayout(rail: LiveRail, method: 'mobile_money' | 'paybill' | 'buy_goods', details: Record<string, string>): Promise<{ id: string; walletId: string }> {
  const walletId = await fundedLiveWallet(rail, '100');
  const beneficiaryId = await liveBeneficiary(rail, method, details);
  const q = await quote(rail.api, rail.key, { direction: 'offramp', source_amount: '20', beneficiary_id: beneficiaryId, payment_method: method });
  const res = await rail.api.http.post(`${BASE}/offramps`).set(writeHeaders(rail.key)).send({ quote_id: q.id, funding_source: { wallet_id: walletId } });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return { id: res.body.id, walletId };
}

export interface LiveChainRail extends LiveRail {
  anvil: Anvil;
  token: Address;
  /** The live treasury hot wallet, holding gas and `float` USDC. */
  hot: Address;
}

/**
 * The live rail on a real chain: Anvil playing base with the test USDC, the hot wallet funded (10 ETH and `float`
 * USDC, one block before the watcher's first scan, so unrecorded), and a live key no polling test meets the limit of.
 * The shared test database forgets what earlier runs' chains left (cursor, sends, nonces, inflows).
 */
export async function startLiveChainRail(options: { pools?: Pool[]; env?: Record<string, string>; float?: bigint; momo?: boolean } = {}): Promise<LiveChainRail> {
  const anvil = await startAnvil({ chainId: 8453 });
  const token = await deployTestUsdc(anvil);
  const hot = getConfig().wallets.live!.treasuryAddress;
  await anvil.publicClient.request({ method: 'anvil_setBalance' as never, params: [hot, `0x${parseEther('10').toString(16)}`] as never });
  await mintUsdc(anvil, token, hot, options.float ?? 100_000_000_000n);
  await anvil.publicClient.request({ method: 'anvil_mine' as never, params: ['0x1'] as never });
  await forgetLiveChain();
  const rail = await startLiveRail({
    pools: options.pools, momo: options.momo,
    env: { RAMPWAY_TEST_LIVE_CHAIN: '', RPC_URL_BASE: anvil.rpcUrl, USDC_ADDRESS_BASE: token, SETTLEMENT_POLL_MS: '150', ...options.env },
  });
  return {
    ...rail, anvil, token, hot,
    async close() {
      await rail.close();
      await anvil.stop();
      await forgetLiveChain();
    },
  };
}

/** A fresh EOA registered and verified as an external wallet of the live business. */
export async function liveExternalAccount(rail: LiveRail) {
  const pk = generatePrivateKey();
  const account = privateKeyToAccount(pk);
  const res = await rail.api.http.post(`${BASE}/wallets`).set(writeHeaders(rail.key)).send({ address: account.address, chain: 'base' });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  const challenge = await rail.api.http.post(`${BASE}/wallets/${res.body.id}/verification-challenges`).set(writeHeaders(rail.key));
  const verified = await rail.api.http.post(`${BASE}/wallets/${res.body.id}/verify`).set(writeHeaders(rail.key)).send({
    challenge_id: challenge.body.id, signature: await account.signMessage({ message: challenge.body.message }),
  });
  expect(verified.status, JSON.stringify(verified.body)).to.equal(200);
  return { account: { address: account.address, key: pk }, wallet: res.body as { id: string; address: string } };
}

/**
 * A live off-ramp of 20 USDC from a fresh verified external wallet that holds `extra` USDC beyond its total_required
 * and gas: the payer's side, ready to transfer. `body`: more of the POST /offramps body (refund_address).
 */
export async function liveExternalOfframp(rail: LiveChainRail, phone: string, extra = 0n, body: Record<string, unknown> = {}) {
  const { account, wallet } = await liveExternalAccount(rail);
  const beneficiaryId = await liveBeneficiary(rail, 'mobile_money', { phone_number: phone, mobile_network: 'safaricom' });
  const q = await quote(rail.api, rail.key, { direction: 'offramp', source_amount: '20', beneficiary_id: beneficiaryId });
  const res = Object.keys(body).length
    ? await rail.api.http.post(`${BASE}/offramps`).set(writeHeaders(rail.key)).send({ quote_id: q.id, funding_source: { wallet_id: wallet.id }, ...body })
    : await offramp(rail.api, rail.key, q.id, wallet.id);
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  const created = res.body;
  const total = toMinor(created.settlement.total_required, USDC_SCALE);
  await mintUsdc(rail.anvil, rail.token, account.address, total + extra);
  await rail.anvil.publicClient.request({ method: 'anvil_setBalance' as never, params: [account.address, `0x${parseEther('1').toString(16)}`] as never });
  return { account, wallet, beneficiaryId, created, total };
}

/** The payer's ERC-20 transfer, mined. */
export async function transferUsdcFrom(rail: LiveChainRail, privateKey: Hex, to: string, amount: bigint): Promise<Hex> {
  const hash = await rail.anvil.walletClient.writeContract({
    address: rail.token, abi: erc20Abi, functionName: 'transfer', args: [getAddress(to), amount], account: privateKeyToAccount(privateKey), chain: rail.anvil.chain,
  });
  await rail.anvil.publicClient.waitForTransactionReceipt({ hash });
  return hash;
}

async function forgetLiveChain(): Promise<void> {
  const ds = await getDs();
  for (const table of ['chain_cursors', 'chain_sends', 'chain_inflows']) await ds.query(`DELETE FROM ${table} WHERE environment = 'live' AND chain = 'base'`);
  // Addresses earlier rails left open were issued on chains that are gone: their heights mean nothing on this one (the
  // watcher's first scan would start at them).
  for (const table of ['settlements', 'payment_intents', 'liquidation_addresses']) await ds.query(`UPDATE ${table} SET issued_block = NULL WHERE environment = 'live' AND chain = 'base' AND issued_block IS NOT NULL`);
}
