import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { encodeFunctionData, erc20Abi, type Address, type Hex, type PublicClient } from 'viem';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { makeBusiness } from '../helpers/factories.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { expectLedgerSound, kesBeneficiary, offramp, quote, verifiedWallet } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { deployTestUsdc, mintUsdc, startAnvil, type Anvil } from '../helpers/chain.js';
import { newAccount } from '../helpers/wallets.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { createPaymentIntent, loadPaymentIntent, type PaymentIntentRow } from '../../shared/domain/payment-intents.js';
import { loadSettlement } from '../../shared/domain/settlements.js';
import { SANDBOX_RATES } from '../../shared/domain/rates.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { matchDepositAddresses, readCursor, scanChain } from '../../shared/chain/scanner.js';
import type { Config } from '../../shared/config.js';
import { createWorkerRedis } from '../../shared/queues/connections.js';
import { closeQueues, createQueues, type Queues } from '../../shared/queues/producer.js';
import type { Redis } from 'ioredis';
import type { UnitDeps } from '../../shared/db/unit-of-work.js';
import { ANYTHING_OPEN, scanChainJob } from '../../workers/settlement/scan-chain.job.js';
import { registry as metrics } from '../../shared/metrics.js';
import { chainReceiptJob } from '../../workers/settlement/chain-receipt.job.js';
import { schedules } from '../../workers/registry.js';
import { CHAINS } from '../../shared/domain/chains.js';

// The settlement watcher's scan against a real Anvil (chain id 8453 plays base) and the real test database. Off-ramp
// settlements and payment intents are created in a test business's SANDBOX environment and the scan is run for
// 'sandbox' with the Anvil client: the scanner never asks which adapter an environment uses.

const ENV = 'sandbox' as const;
const CHAIN = 'base' as const;
const minor = (v: string) => toMinor(v, USDC_SCALE);

describe('chain scanner (settlement watcher core) on Anvil', function () {
  this.timeout(240_000);
  let anvil: Anvil;
  let token: Address;
  let api: ApiHarness;
  let pools: RunningPools;
  let deps: UnitDeps & { config: Config };
  let queues: Queues;
  let queueRedis: Redis;
  let businessId: string;
  let key: string;

  before(async () => {
    anvil = await startAnvil({ chainId: 8453 });
    token = await deployTestUsdc(anvil);
    await mintUsdc(anvil, token, anvil.deployer.address, minor('1000000'));
    api = await startApi();
    pools = await startPools(['pricing']); // quotes for the off-ramp
    // The scans' jobs (a thousand deposit confirmations, intent expiries) go to queues of their own that no worker
    // reads, so the pools of later test files never inherit them; the run's cleanup deletes them with its prefix.
    queueRedis = createWorkerRedis(api.deps.config.redisUrl);
    queues = createQueues(queueRedis, `${api.deps.config.redisPrefix}-scanner`);
    // Cursor positions are asserted exactly: no trailing rescan (its own test sets it).
    deps = { ds: api.deps.ds, queues, log: api.deps.log, config: { ...api.deps.config, settlementRescanBlocks: 0 } };
    const biz = await makeBusiness();
    [businessId, key] = [biz.businessId, biz.sandboxKey];
  });
  after(async () => {
    await (await getDs()).query(`DELETE FROM chain_cursors WHERE environment = $1 AND chain = $2`, [ENV, CHAIN]);
    if (queues) {
      await Promise.all(Object.values(queues).map((q) => q.obliterate({ force: true })));
      await closeQueues(queues);
      queueRedis.disconnect();
    }
    await pools?.close();
    await api?.close();
    await anvil?.stop();
  });
  afterEach(expectLedgerSound);

  const head = () => anvil.publicClient.getBlockNumber({ cacheTime: 0 });
  const mine = (n: number) => anvil.publicClient.request({ method: 'anvil_mine' as never, params: [`0x${n.toString(16)}`] as never });
  /** The cursor set where the test wants it (the shared test database keeps the row of earlier runs and Anvils). */
  const setCursor = async (next: bigint) =>
    (await getDs()).query(
      `INSERT INTO chain_cursors (environment, chain, next_block, updated_at) VALUES ($1, $2, $3, now())
       ON CONFLICT (environment, chain) DO UPDATE SET next_block = EXCLUDED.next_block, updated_at = now()`,
      [ENV, CHAIN, next.toString()],
    );
  /** From the next block on: whatever the test does next is scanned. */
  const cursorAfterHead = async () => setCursor((await head()) + 1n);
  const scan = (client: PublicClient = anvil.publicClient, maxRange = 2000n) => scanChain(deps, { environment: ENV, chain: CHAIN, client, token, maxRange });

  /** A token transfer from the deployer, mined in its own block (Anvil automines). */
  async function send(to: string, amount: bigint): Promise<Hex> {
    const hash = await anvil.walletClient.writeContract({
      address: token, abi: erc20Abi, functionName: 'transfer', args: [to as Address, amount], account: anvil.deployer, chain: anvil.chain,
    });
    await anvil.publicClient.waitForTransactionReceipt({ hash });
    return hash;
  }

  /** `count` transfers sent together (automine off, explicit nonces), then mined: one block or a few. */
  async function sendMany(transfers: { to: string; amount: bigint }[]): Promise<void> {
    const client = anvil.publicClient;
    await client.request({ method: 'evm_setAutomine' as never, params: [false] as never });
    try {
      let nonce = await client.getTransactionCount({ address: anvil.deployer.address, blockTag: 'pending' });
      const hashes: Hex[] = [];
      for (const t of transfers) {
        hashes.push(await anvil.walletClient.sendTransaction({
          account: anvil.deployer, chain: anvil.chain, to: token, nonce: nonce++, gas: 100_000n, maxFeePerGas: 20_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n,
          data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [t.to as Address, t.amount] }),
        }));
      }
      // 30M gas a block, about 35k-52k a transfer: mine until every one is in.
      for (let i = 0; i < 20; i++) {
        await mine(1);
        const pending = await client.getTransactionCount({ address: anvil.deployer.address, blockTag: 'pending' });
        const latest = await client.getTransactionCount({ address: anvil.deployer.address, blockTag: 'latest' });
        if (pending === latest) break;
      }
      const last = await client.getTransactionReceipt({ hash: hashes[hashes.length - 1] });
      expect(last.status).to.equal('success');
    } finally {
      await client.request({ method: 'evm_setAutomine' as never, params: [true] as never });
    }
  }

  /** Payment intents created through the domain function, `batch` to a unit of work. */
  async function intents(count: number, batch = 100): Promise<PaymentIntentRow[]> {
    const out: PaymentIntentRow[] = [];
    const rate = { rate: SANDBOX_RATES.KES, as_of: new Date().toISOString() };
    for (let done = 0; done < count; done += batch) {
      const n = Math.min(batch, count - done);
      out.push(...(await inUnit(deps, async (unit) => {
        const rows: PaymentIntentRow[] = [];
        for (let i = 0; i < n; i++) {
          rows.push(await createPaymentIntent(unit, deps.config, { businessId, environment: ENV }, randomUUID(), {
            amount: { currency: 'KES', value: '1500.00' }, accepted_payment_methods: ['stablecoin'], settlement: { mode: 'stablecoin', asset: 'USDC', chain: CHAIN },
          }, rate));
        }
        return rows;
      })));
    }
    return out;
  }

  const depositsOf = async (intentId: string) =>
    (await getDs()).query(`SELECT amount::text, usdc_amount::text, transaction_hash, block_number::text, block_hash, payment_key, late_payment FROM treasury_deposits WHERE payment_intent_id = $1`, [intentId]) as Promise<Record<string, string | boolean>[]>;

  it('with no SETTLEMENT_START_BLOCK and no issue block recorded (sandbox addresses), the first scan starts at the chain head and moves the cursor past it', async () => {
    await (await getDs()).query(`DELETE FROM chain_cursors WHERE environment = $1 AND chain = $2`, [ENV, CHAIN]);
    await send(newAccount().address, 1n); // before the watcher, and no open address dates from then: not scanned
    await mine(3);
    const at = await head();
    const first = await scan();
    expect(first).to.deep.include({ from: at, to: at });
    expect(await readCursor(deps, ENV, CHAIN)).to.equal(at + 1n);
    // Nothing new yet: nothing to scan, the cursor stays.
    const idle = await scan();
    expect(idle).to.deep.equal({ from: at + 1n, to: at, logs: 0, matched: 0, head: at });
    expect(await readCursor(deps, ENV, CHAIN)).to.equal(at + 1n);
    // The range is capped at maxRange blocks.
    await mine(20);
    const capped = await scan(anvil.publicClient, 5n);
    expect(capped).to.deep.include({ from: at + 1n, to: at + 5n });
    expect(await readCursor(deps, ENV, CHAIN)).to.equal(at + 6n);
  });

  it('records a payment to an intent once, ignores a transfer to an unrelated address, and a rescan changes nothing', async () => {
    const [intent] = await intents(1);
    await cursorAfterHead();
    const from = (await head()) + 1n;
    const price = minor(intent.usdc_amount);
    const hash = await send(intent.deposit_address, price);
    await send(newAccount().address, 5_000_000n); // unrelated
    const receipt = await anvil.publicClient.getTransactionReceipt({ hash });

    const result = await scan();
    const now = await head();
    expect(result).to.deep.equal({ from, to: now, logs: 2, matched: 1, head: now });
    const deposits = await depositsOf(intent.id);
    expect(deposits).to.have.length(1);
    expect(deposits[0]).to.deep.include({
      usdc_amount: intent.usdc_amount, transaction_hash: hash, block_number: receipt.blockNumber.toString(), block_hash: receipt.blockHash,
      payment_key: `${hash}-${receipt.logs[0].logIndex}`, late_payment: false,
    });
    const paid = (await loadPaymentIntent(deps.ds, intent.id))!;
    expect(paid.status).to.equal('processing');
    expect(minor(paid.received_amount)).to.equal(price);

    // The same blocks again (a crash before the cursor moved): matched again, recorded once.
    await setCursor(from);
    expect(await scan()).to.deep.include({ from, logs: 2, matched: 1 });
    expect(await depositsOf(intent.id)).to.have.length(1);
    expect(minor((await loadPaymentIntent(deps.ds, intent.id))!.received_amount)).to.equal(price);
  });

  it('a node behind the head answers eth_getLogs without the newest blocks: the trailing rescan finds the transfer next time', async () => {
    const [intent] = await intents(1);
    await cursorAfterHead();
    const hash = await send(intent.deposit_address, minor(intent.usdc_amount));
    const mined = (await anvil.publicClient.getTransactionReceipt({ hash })).blockNumber;
    // A load-balanced RPC: the head from one node, the logs from another two blocks behind it.
    const lagging = { ...anvil.publicClient, getLogs: async (args: any) => (await anvil.publicClient.getLogs(args)).filter((l) => l.blockNumber! <= mined - 2n) } as PublicClient;
    const scanWith = (rescan: number) => scanChain({ ...deps, config: { ...deps.config, settlementRescanBlocks: rescan } }, { environment: ENV, chain: CHAIN, client: lagging, token, maxRange: 2000n });
    expect(await scanWith(3)).to.deep.include({ matched: 0 });
    expect(await depositsOf(intent.id)).to.have.length(0);
    // The lagging node caught up; the cursor trailed, so the block is read again.
    const caughtUp = { ...anvil.publicClient } as PublicClient;
    expect(await scanChain({ ...deps, config: { ...deps.config, settlementRescanBlocks: 3 } }, { environment: ENV, chain: CHAIN, client: caughtUp, token, maxRange: 2000n })).to.deep.include({ matched: 1 });
    expect(await depositsOf(intent.id)).to.have.length(1);
    // Without the trail (the cursor past the head), the same lag loses the transfer for good.
    const [other] = await intents(1);
    await cursorAfterHead();
    const lost = await send(other.deposit_address, minor(other.usdc_amount));
    const lostAt = (await anvil.publicClient.getTransactionReceipt({ hash: lost })).blockNumber;
    const behind = { ...anvil.publicClient, getLogs: async (args: any) => (await anvil.publicClient.getLogs(args)).filter((l) => l.blockNumber! < lostAt) } as PublicClient;
    await scanChain(deps, { environment: ENV, chain: CHAIN, client: behind, token, maxRange: 2000n });
    expect(await scan()).to.deep.include({ matched: 0 });
    expect(await depositsOf(other.id)).to.have.length(0);
  });

  it('records transfers to an external-wallet off-ramp settlement: partial ones add up, then it confirms; a rescan changes nothing', async () => {
    const beneficiary = await kesBeneficiary(api, key);
    const wallet = await verifiedWallet(api, key);
    const q = await quote(api, key, { direction: 'offramp', source_amount: '20', beneficiary_id: beneficiary });
    const res = await offramp(api, key, q.id, wallet.id);
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const tx = res.body;
    const settlementId: string = tx.settlement.id;
    const to: string = tx.settlement.to_address;
    const total = minor(tx.settlement.total_required);

    await cursorAfterHead();
    const from = (await head()) + 1n;
    await send(to, 5_000_000n);
    expect(await scan()).to.deep.include({ matched: 1 });
    let s = (await loadSettlement(deps.ds, settlementId))!;
    expect(s.status).to.equal('awaiting_transfer');
    expect(minor(s.received_amount)).to.equal(5_000_000n);

    await send(to, total - 5_000_000n);
    expect(await scan()).to.deep.include({ matched: 1 });
    s = (await loadSettlement(deps.ds, settlementId))!;
    expect(s.status).to.equal('confirming');
    expect(minor(s.received_amount)).to.equal(total);
    const txRow = (await deps.ds.query(`SELECT status FROM transactions WHERE id = $1`, [tx.id]))[0];
    expect(txRow.status).to.equal('awaiting_funds');
    const transfers: { block_number: string; block_hash: string }[] = await deps.ds.query(`SELECT block_number::text, block_hash FROM settlement_transfers WHERE settlement_id = $1`, [settlementId]);
    expect(transfers).to.have.length(2);
    expect(transfers.every((t) => /^0x[0-9a-f]{64}$/.test(t.block_hash) && BigInt(t.block_number) >= from)).to.equal(true);

    await setCursor(from);
    expect(await scan()).to.deep.include({ from, matched: 2 });
    s = (await loadSettlement(deps.ds, settlementId))!;
    expect(minor(s.received_amount)).to.equal(total);
    expect((await deps.ds.query(`SELECT count(*)::int AS n FROM settlement_transfers WHERE settlement_id = $1`, [settlementId]))[0].n).to.equal(2);
  });

  it('matches 1,000 open intents with one scan (timed against 10)', async () => {
    const timed = async (count: number) => {
      const rows = await intents(count);
      await cursorAfterHead();
      await sendMany(rows.map((r) => ({ to: r.deposit_address, amount: minor(r.usdc_amount) })));
      const matchStarted = performance.now();
      const matches = await matchDepositAddresses(deps, ENV, CHAIN, rows.map((r) => r.deposit_address.toLowerCase()));
      const matchMs = performance.now() - matchStarted;
      expect(matches).to.have.length(count);
      const started = performance.now();
      const result = await scan();
      const ms = performance.now() - started;
      expect(result.logs).to.equal(count);
      expect(result.matched).to.equal(count);
      const paid: { n: number }[] = await deps.ds.query(
        `SELECT count(*)::int AS n FROM payment_intents i WHERE i.id = ANY($1::uuid[]) AND i.received_amount = i.usdc_amount AND i.status = 'processing'`,
        [rows.map((r) => r.id)],
      );
      expect(paid[0].n).to.equal(count);
      return { ms, matchMs, blocks: Number(result.to - result.from + 1n) };
    };
    const ten = await timed(10);
    const thousand = await timed(1000);
    // The one matching query, then one unit of work per matching log: the scan grows with the transfers it records, the
    // query with the recipients it looks up, and neither with how many addresses are open.
    console.log(`      scan with 10 open intents paid:    ${ten.ms.toFixed(0)} ms (${(ten.ms / 10).toFixed(1)} ms a transfer, ${ten.blocks} blocks; match query ${ten.matchMs.toFixed(1)} ms)`);
    console.log(`      scan with 1,000 open intents paid: ${thousand.ms.toFixed(0)} ms (${(thousand.ms / 1000).toFixed(1)} ms a transfer, ${thousand.blocks} blocks; match query ${thousand.matchMs.toFixed(1)} ms)`);
  });

  it('a scan over unrelated transfers costs the same however many addresses are open', async () => {
    // Thousands of intents are open by now (the test above); an unrelated range of 50 transfers is one query, one request.
    await cursorAfterHead();
    await sendMany(Array.from({ length: 50 }, () => ({ to: newAccount().address, amount: 1n })));
    let getLogs = 0;
    const counting = { ...anvil.publicClient, getLogs: ((args: never) => (getLogs++, anvil.publicClient.getLogs(args))) as unknown as PublicClient['getLogs'] } as PublicClient;
    const started = performance.now();
    const result = await scan(counting);
    const ms = performance.now() - started;
    expect(result).to.deep.include({ logs: 50, matched: 0 });
    expect(getLogs).to.equal(1);
    console.log(`      scan of 50 unrelated transfers with ${(await deps.ds.query(`SELECT count(*)::int AS n FROM payment_intents WHERE environment = 'sandbox' AND chain = 'base'`))[0].n} intents in the table: ${ms.toFixed(0)} ms`);
  });

  it('a range the RPC refuses is halved down to what it accepts, and still covers every block', async () => {
    const [intent] = await intents(1);
    await cursorAfterHead();
    const from = (await head()) + 1n;
    const amounts = [1_000_000n, 2_000_000n, 3_000_000n];
    for (const amount of amounts) {
      await send(intent.deposit_address, amount);
      await mine(4);
    }
    const last = await head();
    const asked: [bigint, bigint][] = [];
    const refused: [bigint, bigint][] = [];
    const LIMIT = 3n;
    const refusing = {
      ...anvil.publicClient,
      getLogs: (async (args: { fromBlock: bigint; toBlock: bigint }) => {
        if (args.toBlock - args.fromBlock + 1n > LIMIT) {
          refused.push([args.fromBlock, args.toBlock]);
          throw new Error('block range too large: at most 3 blocks');
        }
        asked.push([args.fromBlock, args.toBlock]);
        return anvil.publicClient.getLogs(args as never);
      }) as unknown as PublicClient['getLogs'],
    } as PublicClient;

    const result = await scan(refusing);
    expect(result).to.deep.equal({ from, to: last, logs: 3, matched: 3, head: last });
    expect(refused.length).to.be.at.least(1);
    // What was asked and accepted covers [from, last] exactly, each piece within the limit.
    const sorted = [...asked].sort((a, b) => (a[0] < b[0] ? -1 : 1));
    expect(sorted[0][0]).to.equal(from);
    expect(sorted[sorted.length - 1][1]).to.equal(last);
    for (let i = 1; i < sorted.length; i++) expect(sorted[i][0]).to.equal(sorted[i - 1][1] + 1n);
    expect(sorted.every(([a, b]) => b - a + 1n <= LIMIT)).to.equal(true);
    expect(await readCursor(deps, ENV, CHAIN)).to.equal(last + 1n);
    const received = (await depositsOf(intent.id)).map((d) => minor(d.usdc_amount as string)).sort();
    expect(received).to.deep.equal(amounts);

    // An RPC that fails even for one block: the scan fails and the cursor stays, for the next scan to retry.
    await mine(2);
    const down = { ...anvil.publicClient, getLogs: (async () => { throw new Error('fetch failed: connection refused'); }) as unknown as PublicClient['getLogs'] } as PublicClient;
    const err = await scan(down).then(() => null, (e: Error) => e);
    expect(err?.message).to.match(/connection refused/);
    expect(await readCursor(deps, ENV, CHAIN)).to.equal(last + 1n);
  });

  it('the scheduled chain.scan job reads the chain through RPC_URL_<CHAIN> and USDC_ADDRESS_<CHAIN>; one scan per chain is scheduled for live', async () => {
    const [intent] = await intents(1);
    await cursorAfterHead();
    await send(intent.deposit_address, minor(intent.usdc_amount));
    const config = { ...deps.config, chains: { ...deps.config.chains, base: { ...deps.config.chains.base, rpcUrl: anvil.rpcUrl, usdcAddress: token } } };
    const result = (await scanChainJob.process({ data: { environment: ENV, chain: CHAIN } } as never, { ...deps, config })) as { matched: number; lag: number };
    expect(result.matched).to.equal(1);
    // Scanned up to the head: no lag, and the gauge Prometheus reads says so.
    expect(result.lag).to.equal(0);
    expect(await metrics.getSingleMetricAsString('rampway_settlement_scan_lag_blocks')).to.match(new RegExp(`\\{environment="${ENV}",chain="${CHAIN}"\\} 0`));
    expect(await depositsOf(intent.id)).to.have.length(1);
    // A chain with nothing to watch costs one query and no RPC call (this RPC URL answers nothing).
    const idle = { ...config, chains: { ...config.chains, avalanche: { ...config.chains.avalanche, rpcUrl: 'http://127.0.0.1:9' } } };
    expect(await scanChainJob.process({ data: { environment: 'live', chain: 'avalanche' } } as never, { ...deps, config: idle })).to.equal('nothing open');
    expect(schedules().filter((sch) => sch.name === 'chain.scan').map((sch) => (sch.data as { chain: string }).chain).sort()).to.deep.equal([...CHAINS].sort());
    // And one reconciliation of the ledger against the chain per chain, for live.
    expect(schedules().filter((sch) => sch.name === 'chain.reconcile').map((sch) => sch.data)).to.deep.equal(CHAINS.map((chain) => ({ environment: 'live', chain })));
  });

  it('a hash the business names is read at once (chain.receipt): its transfers to our addresses recorded once, a foreign one changes nothing', async () => {
    const [intent] = await intents(1);
    const paid = await send(intent.deposit_address, minor(intent.usdc_amount));
    const foreign = await send(newAccount().address, 1_000_000n);
    const config = { ...deps.config, chains: { ...deps.config.chains, base: { ...deps.config.chains.base, rpcUrl: anvil.rpcUrl, usdcAddress: token } } };
    const run = (hash: Hex) => chainReceiptJob.process({ data: { environment: ENV, chain: CHAIN, transactionHash: hash } } as never, { ...deps, config });
    expect(await run(paid)).to.deep.equal({ matched: 1 });
    expect(await run(paid)).to.deep.equal({ matched: 1 }); // applied again: still one deposit
    expect(await depositsOf(intent.id)).to.have.length(1);
    expect((await depositsOf(intent.id))[0].transaction_hash).to.equal(paid);
    expect(await run(foreign)).to.deep.equal({ matched: 0 });
    // Not mined (unknown hash): the job fails, to be retried.
    let thrown = false;
    await run(`0x${'ab'.repeat(32)}`).catch(() => (thrown = true));
    expect(thrown).to.equal(true);
  });

  it('the watcher\'s gate finds recently changed settlements and intents by index, never by reading the tables (issue 39)', async () => {
    const ds = await getDs();
    const runner = ds.createQueryRunner();
    await runner.startTransaction();
    try {
      // Whatever the tables hold: where an index can answer, the plan uses it (a full read took 2.2 s a poll beside a
      // million transactions).
      await runner.query('SET LOCAL enable_seqscan = off');
      const plan = (await runner.query(`EXPLAIN ${ANYTHING_OPEN}`.replace(/\$1/g, `'live'`).replace(/\$2/g, `'polygon'`).replace(/\$3/g, '604800')))
        .map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN']).join('\n');
      expect(plan).to.not.match(/Seq Scan on (settlements|payment_intents)/);
      expect(plan).to.match(/settlements_changed_idx/).and.match(/payment_intents_changed_idx/);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  });
});
