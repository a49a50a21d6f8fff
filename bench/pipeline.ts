// npm run bench:pipeline (and the end of npm run bench): sandbox off-ramp lifecycles per second with every pool in
// this one process, beside a raw BullMQ no-op job throughput measured in the same run. Own database and Redis prefix.
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Queue, Worker } from 'bullmq';
import { ensureDatabase, ensureRedis } from '../scripts/preflight.js';

const LIFECYCLES = Number(process.env.BENCH_LIFECYCLES ?? 1000);
/** Payments to one business's payment intents: deposits into one hot treasury account. */
const DEPOSITS = Number(process.env.BENCH_DEPOSITS ?? 1000);
const NOOP_JOBS = Number(process.env.BENCH_NOOP_JOBS ?? 5000);
/** Off-ramps started at once, as concurrent API requests would. */
const WIDTH = Number(process.env.BENCH_WIDTH ?? 16);
const env = {
  DATABASE_URL: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/rampway_bench',
  REDIS_PREFIX: `rampway-pipeline-${Date.now().toString(36)}`,
  LOG_LEVEL: 'silent',
  SANDBOX_STEP_MS: '0',
  OUTBOX_POLL_MS: '1000',
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
const { createCustomer } = await import('../shared/domain/customers.js');
const { fundSandboxWallet } = await import('../shared/domain/wallet-balances.js');
const { createBeneficiary } = await import('../shared/domain/beneficiaries.js');
const { createQuote } = await import('../shared/domain/quotes.js');
const { startOfframp } = await import('../shared/domain/offramps.js');
const { startWorkers } = await import('../workers/runtime.js');
const { createPaymentIntent, intentJobs } = await import('../shared/domain/payment-intents.js');
const { sandboxRateSource } = await import('../shared/domain/rates.js');

const config = getConfig();
const ds = createDataSource({ poolSize: Number(process.env.BENCH_DB_POOL ?? 20) });
await ds.initialize();
await runMigrations(ds);
const connection = createWorkerRedis(config.redisUrl);
const queues = createQueues(createWorkerRedis(config.redisUrl), config.redisPrefix);
const deps = { config, ds, queues, log: logger() };

/** Runs `work(i)` for i < n, `width` at a time: the API's request concurrency, not one request after another. */
async function parallel(n: number, width: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < n) await work(next++);
  }));
}

async function until(sql: string, params: unknown[], wanted: number, label: string): Promise<void> {
  const deadline = Date.now() + 600_000;
  for (;;) {
    const [{ n }] = await ds.query(sql, params);
    if (Number(n) >= wanted) return;
    if (Date.now() > deadline) throw new Error(`${label}: ${n}/${wanted} after 10 minutes`);
    // Not too often: this count is load on the database the pipeline shares.
    await new Promise((r) => setTimeout(r, 250));
  }
}

// Baseline: BullMQ itself, no-op jobs through one queue and a worker of the same concurrency as the providers pool.
const noopQueue = new Queue('bench-noop', { connection: createWorkerRedis(config.redisUrl), prefix: config.redisPrefix });
let processed = 0;
const noopWorker = new Worker('bench-noop', async () => { processed += 1; }, { connection: createWorkerRedis(config.redisUrl), prefix: config.redisPrefix, concurrency: 50 });
const noopStart = performance.now();
for (let i = 0; i < NOOP_JOBS; i += 500) await noopQueue.addBulk(Array.from({ length: Math.min(500, NOOP_JOBS - i) }, (_, j) => ({ name: 'noop', data: { i: i + j } })));
while (processed < NOOP_JOBS) await new Promise((r) => setTimeout(r, 5));
const noopPerSecond = NOOP_JOBS / ((performance.now() - noopStart) / 1000);
await noopWorker.close();
await noopQueue.obliterate({ force: true });
await noopQueue.close();

// Setup (not measured): a business, a beneficiary, funded managed wallets.
const biz = await createBusiness({ ds, config }, { name: `Pipeline ${randomUUID().slice(0, 8)}` });
const scope = { businessId: biz.business_id, environment: 'sandbox' as const };
const beneficiary = await inUnit(deps, (unit) =>
  createBeneficiary(unit.em, config.encryptionKeys, scope, { currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Bench', details: { phone_number: '+254722480163', mobile_network: 'safaricom' } }),
);
const wallets: string[] = [];
for (let i = 0; i < LIFECYCLES; i++) {
  const { customer } = await inUnit(deps, (unit) => createCustomer(unit.em, config.wallets, scope, { external_reference: `bench-${randomUUID()}` }));
  await inUnit(deps, (unit) => fundSandboxWallet(unit.em, config, scope, customer.wallet_id, { chain: 'base', amount: '20' }));
  wallets.push(customer.wallet_id);
}
const runtime = startWorkers({ pools: ['pricing', 'settlement', 'providers', 'sandbox'], deps, connection, schedules: false });

// Stage 1: quotes priced by the pricing pool.
const quoteIds: string[] = Array.from({ length: LIFECYCLES }, () => randomUUID());
const quoteStart = performance.now();
await parallel(LIFECYCLES, WIDTH, (i) =>
  inUnit(deps, (unit) => createQuote(unit, deps.config, scope, quoteIds[i], { direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '10', beneficiary_id: beneficiary.beneficiary.id })).then(() => undefined),
);
await until(`SELECT count(*) AS n FROM quotes WHERE id = ANY($1) AND status = 'available'`, [quoteIds], LIFECYCLES, 'quotes');
const quoteSeconds = (performance.now() - quoteStart) / 1000;

// Stage 2: off-ramps from managed wallets, created -> signing -> submitting -> awaiting_funds -> funded -> processing -> completed.
const txIds: string[] = [];
// Where the bottleneck sits: how busy this process's event loop was, and how much CPU it got, while lifecycles ran.
const loop0 = performance.eventLoopUtilization();
const cpu0 = process.cpuUsage();
const lifecycleStart = performance.now();
await parallel(LIFECYCLES, WIDTH, async (i) => {
  const { transaction } = await inUnit(deps, (unit) => startOfframp(unit, config, scope, { quote_id: quoteIds[i], funding_source: { wallet_id: wallets[i] } }));
  txIds.push(transaction.id);
});
const createdSeconds = (performance.now() - lifecycleStart) / 1000;
await until(`SELECT count(*) AS n FROM transactions WHERE id = ANY($1) AND status IN ('completed', 'failed', 'action_required')`, [txIds], LIFECYCLES, 'lifecycles');
const lifecycleSeconds = (performance.now() - lifecycleStart) / 1000;
const loopBusy = performance.eventLoopUtilization(loop0).utilization;
const cpu = process.cpuUsage(cpu0);
const coresUsed = (cpu.user + cpu.system) / 1e6 / lifecycleSeconds;
const [{ completed }] = await ds.query(`SELECT count(*)::int AS completed FROM transactions WHERE id = ANY($1) AND status = 'completed'`, [txIds]);

// Stage 3: payments to payment intents, half by mobile money and half in USDC, all into one business's treasury (a
// single guarded ledger row every confirmation locks): intent awaiting_payment -> processing -> completed, deposit
// pending -> confirmed.
const intentIds: string[] = [];
const rate = await sandboxRateSource.rate('KES');
for (let i = 0; i < DEPOSITS; i++) {
  const intent = await inUnit(deps, (unit) =>
    createPaymentIntent(unit, config, scope, randomUUID(), { amount: { currency: 'KES', value: `${100 + (i % 500)}.00` }, accepted_payment_methods: ['mobile_money', 'stablecoin'], settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } }, rate),
  );
  intentIds.push(intent.id);
}
const depositStart = performance.now();
await parallel(DEPOSITS, WIDTH, (i) => inUnit(deps, (unit) => unit.stage(intentJobs.sandboxPay(intentIds[i], i % 2 ? 'stablecoin' : 'mobile_money', 'bench'), scope)));
await until(`SELECT count(*) AS n FROM treasury_deposits WHERE payment_intent_id = ANY($1) AND status = 'confirmed'`, [intentIds], DEPOSITS, 'deposits');
const depositSeconds = (performance.now() - depositStart) / 1000;
const [{ sound }] = await ds.query(
  // Stored balances are in minor units (micro-USDC); deposits are decimal USDC.
  `SELECT (SELECT balance FROM ledger_accounts WHERE business_id = $1 AND environment = 'sandbox' AND account_key = 'treasury:USDC')
        = (SELECT sum(usdc_amount) * 1000000 FROM treasury_deposits WHERE business_id = $1 AND status = 'confirmed') AS sound`,
  [scope.businessId],
);

// Stage 4: the hot account alone. Ledger entries into and out of one business's treasury (a guarded row every entry
// locks, overdraft checked), POSTINGS of them WIDTH * 3 at a time: postings per second, deadlock retries, and whether
// the stored balance still equals the sum of its postings.
const POSTINGS = Number(process.env.BENCH_POSTINGS ?? 2000);
const { postEntry, findLedgerInconsistencies, InsufficientFundsError } = await import('../shared/domain/ledger.js');
let retries = 0;
let refused = 0;
const counting = { ...deps, log: Object.assign(Object.create(deps.log), { warn: () => { retries += 1; } }) };
const hot = { businessId: biz.business_id, environment: 'sandbox' as const };
const treasury = { kind: 'treasury' as const, asset: 'USDC' };
const clearing = { kind: 'inbound_clearing' as const, asset: 'USDC' };
const postingsSince = new Date();
const postingStart = performance.now();
await parallel(POSTINGS, WIDTH * 3, (i) => inUnit(counting, async (unit) => {
  // Two in, one out: the treasury grows, and every third entry proves the overdraft check under contention.
  const amount = i % 3 === 2 ? -1_000_000n : 1_000_000n;
  await postEntry(unit.em, hot, { kind: 'bench_hot_posting', reference: `bench-hot-${i}-${postingStart}`, postings: [{ account: treasury, amount, noOverdraft: true }, { account: clearing, amount: -amount }] });
}).catch((err: unknown) => {
  // A debit the treasury cannot cover at that moment is refused whole: the guard working, not a failure.
  if (!(err instanceof InsufficientFundsError)) throw err;
  refused += 1;
}));
const postingSeconds = (performance.now() - postingStart) / 1000;
const hotFound = await findLedgerInconsistencies(ds, { entriesSince: postingsSince });
const hotSound = hotFound.unbalancedEntries.length === 0 && hotFound.driftedAccounts.length === 0;

// Where the time goes: the mean time each step waited after the previous one (status_history uses the wall clock).
const steps: { to_status: string; ms: string }[] = await ds.query(
  `SELECT to_status, round(avg(ms)::numeric, 1)::text AS ms FROM (
     SELECT to_status, extract(epoch FROM created_at - lag(created_at) OVER (PARTITION BY resource_id ORDER BY id)) * 1000 AS ms
       FROM status_history WHERE resource_id = ANY($1)) s WHERE ms IS NOT NULL GROUP BY to_status ORDER BY avg(ms) DESC`,
  [txIds],
);

// Each job: how long it waited in its queue, and how long it ran (BullMQ's own timestamps).
const perJob = new Map<string, { waited: number; ran: number; n: number }>();
for (const queue of Object.values(queues)) {
  for (const job of await queue.getJobs(['completed'], 0, 20_000)) {
    if (!job.processedOn || !job.finishedOn) continue;
    const entry = perJob.get(job.name) ?? { waited: 0, ran: 0, n: 0 };
    entry.waited += job.processedOn - job.timestamp - (job.opts.delay ?? 0);
    entry.ran += job.finishedOn - job.processedOn;
    entry.n += 1;
    perJob.set(job.name, entry);
  }
}
const jobLines = [...perJob].filter(([name]) => name !== 'outbox.cleanup').map(([name, e]) => `${name} waited ${(e.waited / e.n).toFixed(0)} ms, ran ${(e.ran / e.n).toFixed(1)} ms (${e.n})`);

await runtime.shutdown();
await closeQueues(queues);
connection.disconnect();
await ds.destroy();

const lines = [
  `pipeline: ${LIFECYCLES} sandbox off-ramps from managed wallets, SANDBOX_STEP_MS=0, pricing + settlement + providers + sandbox pools in one process`,
  `  raw BullMQ no-op jobs         ${noopPerSecond.toFixed(0).padStart(7)} jobs/s (baseline, concurrency 50)`,
  `  quotes priced                 ${(LIFECYCLES / quoteSeconds).toFixed(0).padStart(7)} /s`,
  `  off-ramps started (API work)  ${(LIFECYCLES / createdSeconds).toFixed(0).padStart(7)} /s (${WIDTH} at a time)`,
  `  lifecycles completed          ${(completed / lifecycleSeconds).toFixed(0).padStart(7)} /s (${completed}/${LIFECYCLES} completed; goal 300/s)`,
  `  mean wait before each step:   ${steps.map((s) => `${s.to_status} ${s.ms} ms`).join(', ')}`,
  `  slowest step: ${steps[0]?.to_status ?? 'n/a'}`,
  `  this process during lifecycles: event loop busy ${(loopBusy * 100).toFixed(0)}%, ${coresUsed.toFixed(2)} cores of CPU (PostgreSQL and Redis share the rest of the machine)`,
  `  hot treasury postings         ${(POSTINGS / postingSeconds).toFixed(0).padStart(7)} /s (${POSTINGS} entries into and out of one treasury, ${WIDTH * 3} at a time; ${retries} deadlock retries, ${refused} debits refused for funds; ledger ${hotSound ? 'sound' : 'UNSOUND'}; goal 200/s)`,
  `  treasury deposits confirmed   ${(DEPOSITS / depositSeconds).toFixed(0).padStart(7)} /s (${DEPOSITS} payments into one treasury; balance ${sound ? 'equals' : 'DIFFERS FROM'} the confirmed deposits)`,
  `  jobs (mean queue wait, mean run time): ${jobLines.join('; ')}`,
  '',
];
process.stdout.write(lines.join('\n'));
// Beside the request-path figures of `npm run bench` (bench/run.ts), in the same results file.
const resultsFile = join(import.meta.dirname, 'results.json');
const results = existsSync(resultsFile) ? JSON.parse(readFileSync(resultsFile, 'utf8')) : {};
results.pipeline = {
  measured_at: new Date().toISOString(),
  lifecycles: LIFECYCLES,
  noop_jobs_per_second: Math.round(noopPerSecond),
  quotes_per_second: Math.round(LIFECYCLES / quoteSeconds),
  offramps_started_per_second: Math.round(LIFECYCLES / createdSeconds),
  lifecycles_per_second: Math.round(completed / lifecycleSeconds),
  lifecycles_goal_per_second: 300,
  event_loop_busy: Number(loopBusy.toFixed(2)),
  cores_used: Number(coresUsed.toFixed(2)),
  slowest_step: steps[0]?.to_status ?? null,
  treasury_deposits_per_second: Math.round(DEPOSITS / depositSeconds),
  treasury_balance_exact: Boolean(sound),
  hot_treasury_postings_per_second: Math.round(POSTINGS / postingSeconds),
  hot_treasury_deadlock_retries: retries,
  hot_treasury_ledger_sound: hotSound,
};
writeFileSync(resultsFile, `${JSON.stringify(results, null, 2)}\n`);
process.exit(0);
