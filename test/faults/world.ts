// Everything one fault run stands on: Anvil playing base with the test USDC and a funded hot wallet, the JSON-RPC
// fault relay in front of it, the Daraja and MTN MoMo stand-ins behind their fault relays, a rate source, and the service as child
// processes (web + all worker pools: chaos/service.ts) pointed at the relays. The harness itself (payers, the miner,
// reorgs, invariant reads) talks to Anvil directly.
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { erc20Abi, getAddress, parseEther, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { deployTestUsdc, mintUsdc, startAnvil, type Anvil } from '../helpers/chain.js';
import { darajaEnv, startFakeDaraja, startFakeRates, type FakeDaraja } from '../helpers/fake-daraja.js';
import { makeBusiness, makeKey } from '../helpers/factories.js';
import { getDs, testRedis } from '../helpers/shared.js';
import { until } from '../helpers/until.js';
import { enableLive } from '../../shared/admin/commands.js';
import { getConfig } from '../../shared/config.js';
import { treasuryAddress } from '../../shared/chain/hd-wallet.js';
import { startService, type Answer, type Service } from '../chaos/service.js';
import { startRpcFaults, type RpcFaultProxy } from './rpc-faults.js';
import { startDarajaFaults, type DarajaFaults } from './daraja-faults.js';
import { momoEnv, startFakeMomo, type FakeMomo } from '../helpers/fake-momo.js';
import { startMomoFaults, type MomoFaults } from './momo-faults.js';
import type { Plan } from './schedule.js';

export const CONFIRMATIONS = 4;
export const SETTLEMENT_TTL_SECONDS = 30;
/** Each call to Daraja or MTN MoMo is abandoned after this long. */
const DARAJA_TIMEOUT_MS = 2000;
export const HOT_FLOAT = 1_000_000_000_000n;

export interface World {
  plan: Plan;
  anvil: Anvil;
  token: Address;
  hot: Address;
  rpc: RpcFaultProxy;
  daraja: DarajaFaults;
  fake: FakeDaraja;
  momo: MomoFaults;
  /** The MoMo stand-in, read only for MTN's own status of a request (as its status GET answers it). */
  momoFake: FakeMomo;
  service: Service;
  businessId: string;
  liveKey: string;
  sandboxKey: string;
  /** (time, head) samples taken by the miner: how deep a block was at a moment. */
  heads: { at: number; head: bigint }[];
  /** The API, with retries over a 503/5xx or a lost connection (the harness is a patient client, not a fault). */
  call(key: string, method: string, path: string, body?: object): Promise<Answer>;
  mine(blocks?: number): Promise<void>;
  /** Stops the miner for the length of `work` (a reorg's snapshot and revert). */
  withoutMiner<T>(work: () => Promise<T>): Promise<T>;
  /** A fresh payer holding `usdc` minor units and gas. */
  payer(usdc: bigint): Promise<{ address: Address; key: Hex }>;
  transfer(from: Hex, to: string, amount: bigint): Promise<Hex | null>;
  mint(to: string, amount: bigint): Promise<void>;
  flushRedis(): Promise<number>;
  close(): Promise<void>;
}

export async function startWorld(plan: Plan): Promise<World> {
  const anvil = await startAnvil({ chainId: 8453 });
  const token = await deployTestUsdc(anvil);
  const hot = getConfig().wallets.live!.treasuryAddress;
  const request = (method: string, params: unknown[] = []) => anvil.publicClient.request({ method: method as never, params: params as never });
  await request('anvil_setBalance', [hot, `0x${parseEther('1000').toString(16)}`]);
  // Minted before the service's watcher first runs: the one difference between the hot wallet's ledger and its chain
  // balance the run expects.
  await mintUsdc(anvil, token, hot, HOT_FLOAT);
  // Mints come from the deployer one at a time: two lifecycles minting at once would sign with the same nonce (the
  // second refused "nonce too low", and its lifecycle not driven).
  let minting: Promise<unknown> = Promise.resolve();
  const mintOne = (to: Hex, amount: bigint): Promise<void> => {
    const next = minting.then(() => mintUsdc(anvil, token, to, amount));
    minting = next.catch(() => undefined);
    return next;
  };
  await request('anvil_mine', ['0x1']);
  // The watcher starts after the float (older runs' open addresses in a shared test database would otherwise send its
  // first scan back to a block of theirs, and the float would be recorded mid-run).
  const startBlock = (await anvil.publicClient.getBlockNumber({ cacheTime: 0 })) + 1n;
  const ds = await getDs();
  for (const table of ['chain_cursors', 'chain_sends', 'chain_inflows']) await ds.query(`DELETE FROM ${table} WHERE environment = 'live' AND chain = 'base'`);
  // Earlier seeds' prompts still without an answer (their stand-in is gone): the sweeper would ask this seed's stand-in
  // about them for a day, each seed more, and their faults would be counted as this run's.
  await ds.query(`DELETE FROM provider_requests WHERE environment = 'live' AND kind = 'collection' AND status IN ('pending', 'sending')`);

  const rpc = await startRpcFaults(anvil.rpcUrl, plan);
  const [fake, rates] = await Promise.all([startFakeDaraja(), startFakeRates()]);
  const daraja = await startDarajaFaults(fake.url, plan, DARAJA_TIMEOUT_MS);
  fake.callbackOrigin = daraja.callbackUrl;
  // MoMo's callbacks keep the path of their X-Callback-Url (PUBLIC_BASE_URL, Daraja's relay) and go to its own relay.
  const momoFake = await startFakeMomo();
  const momo = await startMomoFaults(momoFake.url, plan, DARAJA_TIMEOUT_MS);
  momoFake.callbackOrigin = momo.callbackUrl;
  const token_ = `cbtok_${randomUUID().replace(/-/g, '')}`;
  const service = await startService({
    ...momoEnv({ ...momoFake, url: momo.providerUrl }, daraja.callbackUrl, `momotok_${randomUUID().replace(/-/g, '')}`, 'UGX'),
    ...darajaEnv({ ...fake, url: daraja.providerUrl }, daraja.callbackUrl, token_),
    RATE_SOURCE_URL: rates.url, QUOTE_WAIT_MS: '5000', DARAJA_STATUS_QUERY_AFTER_MS: '1500', DARAJA_REQUEST_TIMEOUT_MS: String(DARAJA_TIMEOUT_MS),
    MOMO_STATUS_QUERY_AFTER_MS: '1500', MOMO_REQUEST_TIMEOUT_MS: String(DARAJA_TIMEOUT_MS),
    RPC_URL_BASE: rpc.url, USDC_ADDRESS_BASE: token, CONFIRMATIONS_BASE: String(CONFIRMATIONS), SETTLEMENT_POLL_MS: '300',
    SETTLEMENT_TTL_SECONDS: String(SETTLEMENT_TTL_SECONDS), CHAIN_RECONCILE_MS: '3600000', PROVIDER_MAX_ATTEMPTS: '3', PROVIDER_RETRY_BASE_MS: '300',
    SANDBOX_STEP_MS: '50', SWEEPER_STALE_SECONDS: '5', SETTLEMENT_START_BLOCK_BASE: startBlock.toString(), AUTO_REFUND_AFTER_SECONDS: '20',
  }, { logDir: process.env.FAULT_LOG_DIR && path.join(process.env.FAULT_LOG_DIR, `seed-${plan.seed}`) });
  daraja.callbackTarget = new URL(service.base).origin;
  momo.callbackTarget = daraja.callbackTarget;

  const business = await makeBusiness(`Faults ${plan.seed}`);
  await enableLive({ ds, config: getConfig() }, { businessId: business.businessId });
  const liveKey = (await makeKey(business.businessId, { environment: 'live', rateLimit: 1_000_000_000 })).key;
  const sandboxKey = (await makeKey(business.businessId, { environment: 'sandbox', rateLimit: 1_000_000_000 })).key;

  const heads: World['heads'] = [];
  let minerPaused = 0;
  let mining = Promise.resolve();
  const tick = async () => {
    if (minerPaused) return;
    await request('anvil_mine', ['0x1']).catch(() => null);
    const head = await anvil.publicClient.getBlockNumber({ cacheTime: 0 }).catch(() => null);
    if (head !== null) heads.push({ at: Date.now(), head });
  };
  const miner = setInterval(() => {
    mining = mining.then(tick);
  }, 300);

  const world: World = {
    plan, anvil, token, hot, rpc, daraja, fake, momo, momoFake, service, businessId: business.businessId, liveKey, sandboxKey, heads,
    async call(key, method, path, body) {
      const idempotencyKey = randomUUID();
      let last: unknown;
      for (let attempt = 0; attempt < 6; attempt++) {
        try {
          const answer = await service.call(key, method, path, body, idempotencyKey);
          if (answer.status < 500 && answer.status !== 429) return answer;
          last = answer;
        } catch (err) {
          last = err;
        }
        await new Promise((r) => setTimeout(r, 500 * (attempt + 1)));
      }
      throw new Error(`${method} ${path} kept failing: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
    },
    async mine(blocks = 1) {
      await request('anvil_mine', [`0x${blocks.toString(16)}`]);
    },
    async withoutMiner(work) {
      minerPaused++;
      await mining;
      try {
        return await work();
      } finally {
        minerPaused--;
      }
    },
    async payer(usdc) {
      const { generatePrivateKey } = await import('viem/accounts');
      const key = generatePrivateKey();
      const address = privateKeyToAccount(key).address;
      await request('anvil_setBalance', [address, `0x${parseEther('1').toString(16)}`]);
      if (usdc > 0n) await mintOne(address, usdc);
      return { address, key };
    },
    async transfer(from, to, amount) {
      const hash = await anvil.walletClient.writeContract({ address: token, abi: erc20Abi, functionName: 'transfer', args: [getAddress(to), amount], account: privateKeyToAccount(from), chain: anvil.chain });
      // A reorg may take the transfer away before its receipt is read: the payer's payment is then not made.
      const receipt = await anvil.publicClient.waitForTransactionReceipt({ hash, timeout: 10_000 }).catch(() => null);
      return receipt ? hash : null;
    },
    async mint(to, amount) {
      await mintOne(getAddress(to), amount);
    },
    async flushRedis() {
      // The run's keys only (its prefix): other test runs may share this Redis.
      const r = testRedis();
      const prefix = getConfig().redisPrefix;
      let cursor = '0';
      let n = 0;
      do {
        const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length) n += await r.del(...keys);
      } while (cursor !== '0');
      return n;
    },
    async close() {
      clearInterval(miner);
      await mining;
      await service.stop();
      await Promise.all([rpc.close(), daraja.close(), fake.close(), momo.close(), momoFake.close(), rates.close()]);
      await anvil.stop();
    },
  };
  return world;
}
