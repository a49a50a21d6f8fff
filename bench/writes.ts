// npm run bench:writes: creates per second through the API, `POST /customers` and `POST /offramps` (each request its
// own Idempotency-Key and body), the web process beside the worker pools as `npm start` runs them. An off-ramp needs an
// available quote of its own: one is priced through the API, then cloned in SQL (BENCH_QUOTES per round), so the load
// measures the off-ramp's own path (quote consumed, transaction, settlement, outbox, idempotency record), funded from a
// verified external wallet (nothing runs after the answer but the settlement's expiry, an hour later).
// Own database (BENCH_DATABASE_URL, default rampway_bench) and Redis prefix; prints a table and the figures as JSON.
// BENCH_BASELINE=<git revision>: the same load against that revision too, in the same run, rounds interleaved (each
// target its own database, <database>_base, processes and port), and the ratio of each figure to the baseline's.
// BENCH_REVISION=<git revision>: that revision instead of this checkout (with its own BENCH_DATABASE_URL).
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import pg from 'pg';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ensureDatabase, ensureRedis } from '../scripts/preflight.js';
import { startProcess, stopProcess, type Started } from '../test/helpers/processes.js';
import { apiCaller } from './seed.js';
import { checkoutRevision, CURRENT_CHECKOUT, runScript } from './baseline.js';

const DURATION = Number(process.env.BENCH_SECONDS ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const QUOTES = Number(process.env.BENCH_QUOTES ?? 6_000);
const PORT = Number(process.env.BENCH_PORT ?? 3932);
const BASELINE = process.env.BENCH_BASELINE;
const env: Record<string, string> = {
  ...(process.env as Record<string, string>),
  DATABASE_URL: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/rampway_bench',
  REDIS_PREFIX: `rampway-bench-w-${Date.now().toString(36)}`,
  LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
  RATE_LIMIT_DEFAULT: '100000000',
  SANDBOX_STEP_MS: '0',
  SETTLEMENT_TTL_SECONDS: '3600',
};

/** CPU seconds a process has used (user + system), from /proc. */
function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0; // a backend that ended between listing and reading
  }
}

let writes = 0;
const refusals = new Set<string>();
/** Every request its own Idempotency-Key and body, as a client creating many resources sends them. */
function uniqueWrites(api: string, key: string, path: string, body: (n: number) => object): autocannon.Options {
  return {
    url: `${api}${path}`,
    connections: CONNECTIONS,
    duration: DURATION,
    requests: [{
      setupRequest: (req: autocannon.Request) => {
        const n = (writes += 1);
        return {
          ...req,
          method: 'POST',
          path: `/api/v1/business${path}`,
          headers: { Authorization: `Bearer ${key}`, 'Idempotency-Key': `bench-${process.pid}-${Date.now().toString(36)}-${n}`, 'Content-Type': 'application/json' },
          body: JSON.stringify(body(n)),
        };
      },
      // The first refusal of each path, so a failed count says why.
      onResponse: (status: number, answer: string) => {
        if (status >= 300 && !refusals.has(path)) {
          refusals.add(path);
          process.stderr.write(`${path}: first refusal ${status} ${String(answer).slice(0, 300)}\n`);
        }
      },
    }] as unknown as autocannon.Request[],
  };
}

interface Target {
  name: string;
  api: string;
  key: string;
  walletId: string;
  quoteId: string;
  db: pg.Pool;
  started: Started[];
}

/** The service of the checkout in `cwd`, migrated, running (web and every pool) and seeded with a business, a verified wallet and a priced quote. */
async function startTarget(name: string, cwd: string, databaseUrl: string, port: number): Promise<Target> {
  const targetEnv = { ...env, DATABASE_URL: databaseUrl, REDIS_PREFIX: `${env.REDIS_PREFIX}-${name}` };
  await ensureDatabase(databaseUrl);
  await runScript(cwd, 'scripts/migrate.ts', [], targetEnv);
  const started: Started[] = [];
  const target: Target = { name, api: `http://127.0.0.1:${port}/api/v1/business`, key: '', walletId: '', quoteId: '', db: new pg.Pool({ connectionString: databaseUrl, max: 2 }), started };
  try {
    started.push(await startProcess('api/main.ts', { ...targetEnv, PORT: String(port) }, 'web listening', [], { cwd }));
    started.push(await startProcess('workers/main.ts', targetEnv, 'workers started', [], { cwd }));
    await seedTarget(target, cwd, targetEnv);
    return target;
  } catch (err) {
    for (const child of started.reverse()) await stopProcess(child);
    await target.db.end();
    throw err;
  }
}

async function seedTarget(target: Target, cwd: string, targetEnv: Record<string, string>): Promise<void> {
  const { name } = target;
  const biz = JSON.parse(await runScript(cwd, 'scripts/admin.ts', ['create-business', '--name', `Bench Writes ${name}`, '--json'], { ...targetEnv, LOG_LEVEL: 'silent' }));
  target.key = biz.keys.find((k: { environment: string }) => k.environment === 'sandbox').key;
  const call = apiCaller(target.api, target.key);
  const account = privateKeyToAccount(generatePrivateKey());
  const wallet = await call('POST', '/wallets', { address: account.address, chain: 'base' });
  const challenge = await call('POST', `/wallets/${wallet.id}/verification-challenges`);
  await call('POST', `/wallets/${wallet.id}/verify`, { challenge_id: challenge.id, signature: await account.signMessage({ message: challenge.message }) });
  target.walletId = wallet.id;
  const beneficiary = await call('POST', '/beneficiaries', {
    currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Bench Payee', details: { phone_number: '+254722480163', mobile_network: 'safaricom' },
  });
  let quote = await call('POST', '/quotes', { direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '25', beneficiary_id: beneficiary.id });
  for (let tries = 0; quote.status === 'pending'; tries++) {
    if (tries > 300) throw new Error(`seeding ${name}: quote ${quote.id} stayed pending`);
    await new Promise((r) => setTimeout(r, 100));
    quote = await call('GET', `/quotes/${quote.id}`);
  }
  target.quoteId = quote.id;
}

/** `n` copies of the target's priced quote, available for an hour: the off-ramps' inputs, one each. */
async function cloneQuotes(t: Target, n: number): Promise<string[]> {
  const { rows: columns } = await t.db.query<{ column_name: string }>(
    `SELECT column_name FROM information_schema.columns WHERE table_name = 'quotes' AND table_schema = current_schema() ORDER BY ordinal_position`);
  const names = columns.map((c) => c.column_name);
  const values = names.map((c) => (c === 'id' ? 'gen_random_uuid()' : c === 'expires_at' ? `now() + interval '1 hour'` : c));
  const { rows } = await t.db.query<{ id: string }>(
    `INSERT INTO quotes (${names.join(', ')}) SELECT ${values.join(', ')} FROM quotes CROSS JOIN generate_series(1, $2) WHERE id = $1 RETURNING id`, [t.quoteId, n]);
  return rows.map((r) => r.id);
}

const scenarios: { name: string; run: (t: Target) => Promise<autocannon.Result> }[] = [
  { name: 'POST /customers', run: (t) => autocannon(uniqueWrites(t.api, t.key, '/customers', (n) => ({ external_reference: `bench-${process.pid}-${n}` }))) },
  {
    name: 'POST /offramps',
    run: async (t) => {
      const quotes = await cloneQuotes(t, QUOTES);
      let next = 0;
      return autocannon(uniqueWrites(t.api, t.key, '/offramps', () => ({ quote_id: quotes[next++ % quotes.length], funding_source: { wallet_id: t.walletId } })));
    },
  },
];

/** CPU per request, which other work on a shared machine moves far less than requests per second: the web process's, and its database's backends'. */
async function cpu(t: Target): Promise<{ web: number; pg: number }> {
  const { rows } = await t.db.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
  return { web: cpuSeconds(t.started[0].child.pid!), pg: rows.reduce((sum, r) => sum + cpuSeconds(r.pid), 0) };
}

await ensureRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const targets: Target[] = [];
try {
  // BENCH_REVISION: a revision in place of this checkout (a change measured on its own: its merge against its parent).
  const revision = process.env.BENCH_REVISION;
  targets.push(await startTarget(revision ?? 'current', revision ? checkoutRevision(revision) : CURRENT_CHECKOUT, env.DATABASE_URL, PORT));
  if (BASELINE) targets.push(await startTarget(`baseline ${BASELINE}`, checkoutRevision(BASELINE), `${env.DATABASE_URL}_base`, PORT + 1));
  // Warm-up: JIT, prepared statements and pools in their steady state before anything counts.
  for (const t of targets) await autocannon({ ...uniqueWrites(t.api, t.key, '/customers', (n) => ({ external_reference: `warm-${process.pid}-${n}` })), duration: 2 });
  type Row = { rps: number[]; p50: number[]; p99: number[]; webMs: number[]; pgMs: number[]; failures: number };
  const results = new Map<string, Row>();
  for (let round = 1; round <= ROUNDS; round++) {
    for (const s of scenarios) {
      // Interleaved, the first target alternating by round: neither gets the machine's quieter moments by its place.
      for (const t of round % 2 ? targets : [...targets].reverse()) {
        const before = await cpu(t);
        const r = await s.run(t);
        const after = await cpu(t);
        const row = results.get(`${s.name} | ${t.name}`) ?? { rps: [], p50: [], p99: [], webMs: [], pgMs: [], failures: 0 };
        results.set(`${s.name} | ${t.name}`, row);
        row.webMs.push(((after.web - before.web) * 1000) / r.requests.total);
        row.pgMs.push(((after.pg - before.pg) * 1000) / r.requests.total);
        row.rps.push(r.requests.average);
        row.p50.push(r.latency.p50);
        row.p99.push(r.latency.p99);
        row.failures += r.non2xx + r.errors + r.timeouts;
      }
    }
    process.stderr.write(`round ${round}/${ROUNDS} done\n`);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const lines = [...results].map(([name, r]) => {
    const base = BASELINE && !name.endsWith(`| baseline ${BASELINE}`) ? results.get(`${name.split(' | ')[0]} | baseline ${BASELINE}`) : undefined;
    const ratio = base ? ` | ${(median(r.rps) / median(base.rps)).toFixed(2)}x` : BASELINE ? ' | ' : '';
    return `| ${name} | ${Math.round(median(r.rps))}${ratio} | ${median(r.p50)} | ${median(r.p99)} | ${median(r.webMs).toFixed(2)} | ${median(r.pgMs).toFixed(2)} | ${r.failures} |`;
  });
  const { rows: [records] } = await targets[0].db.query(`SELECT count(*)::int AS n, pg_total_relation_size('idempotency_records') AS bytes FROM idempotency_records`).catch(() => ({ rows: [null] }));
  process.stdout.write([
    `| measure (median of ${ROUNDS} rounds, ${CONNECTIONS} connections, ${DURATION} s each) | target | req/s${BASELINE ? ' | of baseline' : ''} | p50 ms | p99 ms | web CPU ms per request | PostgreSQL CPU ms per request | failed |`,
    `|---|---|---:|${BASELINE ? '---:|' : ''}---:|---:|---:|---:|---:|`,
    ...lines,
  ].join('\n') + '\n');
  const perRound = (pick: (r: Row) => number[]) => Object.fromEntries([...results].map(([n, r]) => [n, pick(r).map((x) => Number(x.toFixed(2)))]));
  process.stdout.write(`${JSON.stringify({ rps: perRound((r) => r.rps), webMs: perRound((r) => r.webMs), pgMs: perRound((r) => r.pgMs), idempotency_records: records })}\n`);
  process.exitCode = [...results.values()].some((r) => r.failures) ? 1 : 0;
} finally {
  for (const t of targets) {
    for (const child of [...t.started].reverse()) await stopProcess(child);
    await t.db.end();
  }
}
