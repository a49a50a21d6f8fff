// npm run bench:batch (and the end of npm run bench): payout batches of 500 (CONTRACT 16) against the web process and
// every worker pool, each in its own process as the Procfile runs them, on the sandbox. A funded treasury and 500
// beneficiaries; then BATCHES batches of 500 items one after another, each POST /payout-batches timed until its 201
// (goal: under 2 s), then polled until the batch is completed. A small batch first warms the path up.
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { ensureDatabase, ensureRedis } from '../scripts/preflight.js';
import { startProcess, stopProcess, type Started } from '../test/helpers/processes.js';

const ITEMS = 500;
const BATCHES = Number(process.env.BENCH_BATCHES ?? 3);
const ACCEPT_GOAL_MS = 2000;
const COMPLETE_TIMEOUT_MS = 600_000;
const PORT = '3905';
const env: Record<string, string> = {
  ...(process.env as Record<string, string>),
  DATABASE_URL: process.env.BENCH_BATCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/rampway_bench_batch',
  REDIS_PREFIX: `rampway-batch-${Date.now().toString(36)}`,
  LOG_LEVEL: 'info',
  RATE_LIMIT_DEFAULT: '100000000',
  SANDBOX_STEP_MS: '0',
};
const api = `http://127.0.0.1:${PORT}/api/v1/business`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

await ensureDatabase(env.DATABASE_URL);
await ensureRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
Object.assign(process.env, env);
const { createDataSource, runMigrations } = await import('../shared/db/data-source.js');
const { createBusiness } = await import('../shared/admin/commands.js');
const { getConfig } = await import('../shared/config.js');
const { postEntry } = await import('../shared/domain/ledger.js');
const { toMinor, USDC_SCALE } = await import('../shared/domain/money.js');
const ds = createDataSource({ poolSize: 2 });
await ds.initialize();
await runMigrations(ds);

const started: Started[] = [];
try {
  started.push(await startProcess('api/main.ts', { ...env, PORT }, 'web listening'));
  started.push(await startProcess('workers/main.ts', env, 'workers started'));
  const biz = await createBusiness({ ds, config: getConfig() }, { name: `Batch bench ${randomUUID().slice(0, 8)}` });
  const key = biz.keys.find((k) => k.environment === 'sandbox')!.key;
  // The treasury funded as the tests fund it: USDC already confirmed, enough for every batch.
  const funding = toMinor(String((BATCHES + 1) * ITEMS * 20), USDC_SCALE);
  await ds.transaction((em) => postEntry(em, { businessId: biz.business_id, environment: 'sandbox' }, {
    kind: 'bench_treasury_funding',
    postings: [{ account: { kind: 'inbound_clearing', asset: 'USDC' }, amount: -funding }, { account: { kind: 'treasury', asset: 'USDC' }, amount: funding }],
  }));

  const call = async (method: string, path: string, body?: object): Promise<{ status: number; body: Record<string, any> }> => {
    const res = await fetch(`${api}${path}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', ...(method === 'GET' ? {} : { 'Idempotency-Key': `batch-${randomUUID()}` }) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = (await res.json()) as Record<string, any>;
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json).slice(0, 500)}`);
    return { status: res.status, body: json };
  };

  // 500 people, made 8 at a time.
  const beneficiaries: string[] = [];
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (beneficiaries.length < ITEMS) {
      const n = beneficiaries.length;
      beneficiaries.push('');
      const phone = `+2547224${String(n).padStart(4, '0')}9`; // never a sandbox magic ending (0001..0003)
      beneficiaries[n] = (await call('POST', '/beneficiaries', {
        currency: 'KES', payment_method: 'mobile_money', account_holder_name: `Payee ${n}`, details: { phone_number: phone, mobile_network: 'safaricom' },
      })).body.id;
    }
  }));

  /** One batch of `count` items (half KES amounts, half USDC amounts), timed to its 201, then to its completion. */
  const runBatch = async (count: number) => {
    const items = Array.from({ length: count }, (_, i) => ({
      beneficiary_id: beneficiaries[i], amount: i % 2 ? { asset: 'USDC', value: '12.5' } : { currency: 'KES', value: '1500' }, external_reference: `bench-${randomUUID()}`,
    }));
    const t0 = performance.now();
    const created = await call('POST', '/payout-batches', { items });
    const acceptMs = performance.now() - t0;
    if (created.status !== 201 || created.body.items_count !== count) throw new Error(`batch answered ${created.status} with ${created.body.items_count} items`);
    let batch = created.body;
    while (batch.status !== 'completed') {
      if (performance.now() - t0 > COMPLETE_TIMEOUT_MS) throw new Error(`batch ${batch.id}: ${batch.completed_count} completed, ${batch.failed_count} failed after ${COMPLETE_TIMEOUT_MS / 1000} s`);
      await new Promise((r) => setTimeout(r, 250));
      batch = (await call('GET', `/payout-batches/${batch.id}`)).body;
    }
    return { acceptMs, completeMs: performance.now() - t0, completed: batch.completed_count as number, failed: batch.failed_count as number };
  };

  await runBatch(5);
  const load = loadavg()[0];
  const runs = [];
  for (let i = 1; i <= BATCHES; i++) {
    runs.push(await runBatch(ITEMS));
    process.stderr.write(`batch ${i}/${BATCHES}: accepted in ${runs.at(-1)!.acceptMs.toFixed(0)} ms, completed in ${(runs.at(-1)!.completeMs / 1000).toFixed(1)} s\n`);
  }
  const acceptMs = Math.round(median(runs.map((r) => r.acceptMs)));
  const completeS = Number((median(runs.map((r) => r.completeMs)) / 1000).toFixed(1));
  const allPaid = runs.every((r) => r.completed === ITEMS && r.failed === 0);
  process.stdout.write([
    `payout batches of ${ITEMS} on the sandbox, median of ${BATCHES} (1-minute load average ${load.toFixed(2)} when they started)`,
    `  accepted (POST to 201)  ${acceptMs} ms   [${runs.map((r) => r.acceptMs.toFixed(0)).join(', ')}]   goal under ${ACCEPT_GOAL_MS} ms: ${acceptMs < ACCEPT_GOAL_MS ? 'met' : 'missed'}`,
    `  completed (POST to every item final)  ${completeS} s   [${runs.map((r) => (r.completeMs / 1000).toFixed(1)).join(', ')}]   ${allPaid ? 'every item paid' : 'some items failed'}`,
    '',
  ].join('\n'));
  const resultsFile = join(import.meta.dirname, 'results.json');
  const results = existsSync(resultsFile) ? JSON.parse(readFileSync(resultsFile, 'utf8')) : {};
  results.payout_batch = {
    measured_at: new Date().toISOString(), load_average_1m: Number(load.toFixed(2)), items: ITEMS, batches: BATCHES,
    accept_ms: runs.map((r) => Math.round(r.acceptMs)), accept_ms_median: acceptMs, goal_accept_ms: ACCEPT_GOAL_MS, met: acceptMs < ACCEPT_GOAL_MS,
    complete_s: runs.map((r) => Number((r.completeMs / 1000).toFixed(1))), complete_s_median: completeS, all_completed: allPaid,
  };
  writeFileSync(resultsFile, `${JSON.stringify(results, null, 2)}\n`);
  process.exitCode = allPaid ? 0 : 1;
} finally {
  for (const child of started.reverse()) await stopProcess(child);
  await ds.destroy();
}
