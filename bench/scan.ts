// npm run bench:scan (and the end of npm run bench): the settlement watcher's scan against a real Anvil (chain id 8453
// plays base), with 10 open deposit addresses, then 1,000, then 10,000, over ranges of the same shape (10 payments to open
// addresses among 100 unrelated transfers). Half the watched addresses are payment intents' deposit addresses, half
// liquidation addresses (CONTRACT 16), matched by the same one query; each scan pays both kinds. What a scan costs must
// not grow with how many addresses are open.
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeFunctionData, erc20Abi, type Address, type Hex } from 'viem';
import { ensureDatabase, ensureRedis } from '../scripts/preflight.js';
import { deployTestUsdc, mintUsdc, startAnvil } from '../test/helpers/chain.js';

const SIZES = [10, 1_000, Number(process.env.BENCH_SCAN_OPEN ?? 10_000)];
const PAID = 10;
const UNRELATED = 100;
const REPEATS = 3;
const env = {
  DATABASE_URL: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/rampway_bench',
  REDIS_PREFIX: `rampway-scan-${Date.now().toString(36)}`,
  LOG_LEVEL: 'silent',
};
Object.assign(process.env, env);
await ensureDatabase(env.DATABASE_URL);
await ensureRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');

const { getConfig } = await import('../shared/config.js');
const { createDataSource, runMigrations } = await import('../shared/db/data-source.js');
const { createBusiness } = await import('../shared/admin/commands.js');
const { createWorkerRedis } = await import('../shared/queues/connections.js');
const { createQueues, closeQueues } = await import('../shared/queues/producer.js');
const { logger } = await import('../shared/logger.js');
const { inUnit } = await import('../shared/db/unit-of-work.js');
const { createPaymentIntent } = await import('../shared/domain/payment-intents.js');
const { createBeneficiary } = await import('../shared/domain/beneficiaries.js');
const { createLiquidationAddress } = await import('../shared/domain/liquidation-addresses.js');
const { SANDBOX_RATES } = await import('../shared/domain/rates.js');
const { toMinor, USDC_SCALE } = await import('../shared/domain/money.js');
const { scanChain } = await import('../shared/chain/scanner.js');

const config = getConfig();
const ds = createDataSource({ poolSize: 10 });
await ds.initialize();
await runMigrations(ds);
const queueRedis = createWorkerRedis(config.redisUrl);
// The payments' follow-up jobs land in queues no worker reads; they go with this run's prefix.
const queues = createQueues(queueRedis, config.redisPrefix);
const deps = { ds, queues, log: logger(), config };
const anvil = await startAnvil({ chainId: 8453 });
try {
  const token = await deployTestUsdc(anvil);
  await mintUsdc(anvil, token, anvil.deployer.address, 10n ** 15n);
  const biz = await createBusiness({ ds, config }, { name: `Scan ${randomUUID().slice(0, 8)}` });
  // The scanner reads no environment-specific adapter: a sandbox business's intents stand for any open address.
  const scope = { businessId: biz.business_id, environment: 'sandbox' as const };
  const open: { address: string; amount: bigint }[] = [];
  const { beneficiary } = await inUnit(deps, (unit) => createBeneficiary(unit.em, config.encryptionKeys, scope, {
    currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Bench Payee', details: { phone_number: '+254712345678', mobile_network: 'safaricom' },
  }));

  /** Opens addresses until `count` are open, 100 to a unit of work: a payment intent's deposit address, then a liquidation address, in turn. */
  const openUntil = async (count: number) => {
    const rate = { rate: SANDBOX_RATES.KES, as_of: new Date().toISOString() };
    while (open.length < count) {
      const n = Math.min(100, count - open.length);
      const rows = await inUnit(deps, async (unit) => {
        const made: { address: string; amount: bigint }[] = [];
        for (let i = 0; i < n; i++) {
          if ((open.length + i) % 2 === 1) {
            const liquidation = await createLiquidationAddress(unit, config, scope, { chain: 'base', beneficiary_id: beneficiary.id });
            made.push({ address: liquidation.address, amount: toMinor('25', USDC_SCALE) });
            continue;
          }
          const intent = await createPaymentIntent(unit, config, scope, randomUUID(), {
            amount: { currency: 'KES', value: '1500.00' }, accepted_payment_methods: ['stablecoin'], settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' },
          }, rate);
          made.push({ address: intent.deposit_address, amount: toMinor(intent.usdc_amount, USDC_SCALE) });
        }
        return made;
      });
      open.push(...rows);
    }
  };

  /** Transfers sent together with explicit nonces, then mined in one go. */
  const sendMany = async (transfers: { to: string; amount: bigint }[]) => {
    const client = anvil.publicClient;
    await client.request({ method: 'evm_setAutomine' as never, params: [false] as never });
    let nonce = await client.getTransactionCount({ address: anvil.deployer.address, blockTag: 'pending' });
    for (const t of transfers) {
      await anvil.walletClient.sendTransaction({
        account: anvil.deployer, chain: anvil.chain, to: token, nonce: nonce++, gas: 100_000n, maxFeePerGas: 20_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n,
        data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [t.to as Address, t.amount] }),
      });
    }
    await client.request({ method: 'anvil_mine' as never, params: ['0x3'] as never });
    await client.request({ method: 'evm_setAutomine' as never, params: [true] as never });
  };

  let paidSoFar = 0;
  /** One scan over a fresh range holding PAID payments to open, not yet paid addresses and UNRELATED others. */
  const timedScan = async (): Promise<number> => {
    const head = await anvil.publicClient.getBlockNumber({ cacheTime: 0 });
    await ds.query(
      `INSERT INTO chain_cursors (environment, chain, next_block, updated_at) VALUES ('sandbox', 'base', $1, now())
       ON CONFLICT (environment, chain) DO UPDATE SET next_block = EXCLUDED.next_block, updated_at = now()`,
      [(head + 1n).toString()],
    );
    const targets = open.slice(paidSoFar, paidSoFar + PAID);
    paidSoFar += PAID;
    const unrelated = Array.from({ length: UNRELATED }, (_, i) => ({ to: `0x${(BigInt(Date.now()) * 1000n + BigInt(i)).toString(16).padStart(40, '0')}`, amount: 1n }));
    await sendMany([...targets.map((t) => ({ to: t.address, amount: t.amount })), ...unrelated]);
    const started = performance.now();
    const result = await scanChain(deps, { environment: 'sandbox', chain: 'base', client: anvil.publicClient, token: token as Hex, maxRange: 2000n });
    const ms = performance.now() - started;
    if (result.matched !== PAID || result.logs !== PAID + UNRELATED) throw new Error(`scan saw ${result.logs} logs and matched ${result.matched}`);
    return ms;
  };
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

  const medians: number[] = [];
  for (const [i, size] of SIZES.entries()) {
    await openUntil(size + PAID * REPEATS * (i + 1) + PAID);
    if (i === 0) await timedScan(); // warm-up: JIT, connections, plans
    const runs: number[] = [];
    for (let r = 0; r < REPEATS; r++) runs.push(await timedScan());
    medians.push(median(runs));
  }
  const ratio = medians[medians.length - 1] / medians[0];
  process.stdout.write([
    `settlement scan on Anvil: ${PAID} payments among ${PAID + UNRELATED} transfers a scan, median of ${REPEATS}`,
    ...SIZES.map((size, i) => `  with ${size.toLocaleString('en').padStart(6)} watched addresses (half liquidation addresses) ${medians[i].toFixed(0).padStart(6)} ms`),
    `  ratio ${SIZES[SIZES.length - 1].toLocaleString('en')} : ${SIZES[0]} = ${ratio.toFixed(2)} (goal at most 1.5)`,
    '',
  ].join('\n'));
  const resultsFile = join(import.meta.dirname, 'results.json');
  const results = existsSync(resultsFile) ? JSON.parse(readFileSync(resultsFile, 'utf8')) : {};
  results.scan = {
    measured_at: new Date().toISOString(), open: SIZES, liquidation_share: 0.5, ms: medians.map((m) => Math.round(m)), ratio: Number(ratio.toFixed(2)), goal_ratio: 1.5,
  };
  writeFileSync(resultsFile, `${JSON.stringify(results, null, 2)}\n`);
} finally {
  await anvil.stop();
  await Promise.all(Object.values(queues).map((q) => q.obliterate({ force: true }).catch(() => undefined)));
  await closeQueues(queues);
  queueRedis.disconnect();
  await ds.destroy();
}
process.exit(0);
