// npm run bench:pipeline, first line: sandbox off-ramp lifecycles per second as a client meets the service. The
// service runs as `npm start` runs it (web, the worker pools and the settlement pool as their own processes), with its
// defaults (confirmations: base's 12) but a short sandbox step (BENCH_STEP_MS, 20 ms); BENCH_CLIENTS concurrent clients
// each quote, create an off-ramp from their funded managed wallet and wait for its `transaction.completed` webhook,
// then start the next. Only the API is used. It first measures a lifecycle alone (the latency floor), so the figure
// can say whether it is capacity (clients waited in queues) or latency (clients waited for the lifecycle's own steps).
// Beside the figure: where the CPU went per process (web, worker, settlement, PostgreSQL, Redis) and per lifecycle the
// database transactions, row writes, BullMQ jobs and Redis commands. Own database and Redis prefix. BENCH_FORMATION=pooler
// runs web and each pool as its own process through a PgBouncer (npm run bench:pooler runs both, one after the other);
// BENCH_FORMATION=scaled runs two of each (two web processes, the clients taking turns between them, and two processes
// of every pool), all through one PgBouncer: the Procfile's formation at two dynos of each kind.
// BENCH_WAIT=poll: the clients (400 by default) register no webhook endpoint and poll GET /transactions/{id} every
// BENCH_POLL_MS (250) until the off-ramp ends. Statements per lifecycle are counted when PostgreSQL has
// pg_stat_statements loaded (shared_preload_libraries); each of issue 39's goals is printed with its figure and met or not.
// BENCH_WARMUP (1,000): lifecycles run under the full load first and not counted, so the figures are a warm service's
// (V8 still compiles hot code for the first thousand or so lifecycles: about 5 ms of CPU per lifecycle more; 0 measures
// from a cold start, as the figures before 2026-11-29's eleventh session did).
import { spawn, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createWriteStream, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import pg from 'pg';
import { ensureDatabase, ensureRedis } from '../scripts/preflight.js';
import { checkoutRevision, runScript } from './baseline.js';
import { WEB_NODE_FLAGS } from '../shared/web-flags.js';

const WAIT = process.env.BENCH_WAIT === 'poll' ? 'poll' : 'webhook';
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 250);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? (WAIT === 'poll' ? 400 : 200));
const LIFECYCLES = Number(process.env.BENCH_CLIENT_LIFECYCLES ?? 3000);
const STEP_MS = process.env.BENCH_STEP_MS ?? '20';
const PORT = Number(process.env.BENCH_PORT ?? 3921);
const HOOK_PORT = PORT + 1;
const databaseUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/rampway_bench_client';
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `rampway-client-bench-${Date.now().toString(36)}`;
// BENCH_REVISION=<git revision>: the service of that revision (a worktree of its own, bench/baseline.ts) instead of
// this checkout's, measured by this client: a figure "before" (the kernel issue's pipeline at 0f16dc5) against "after".
const root = process.env.BENCH_REVISION ? checkoutRevision(process.env.BENCH_REVISION) : join(import.meta.dirname, '..');

// A database made anew each run: a table that grows from run to run would make one run's figures incomparable with the
// next. BENCH_VOLUME=1: made as a copy of `<name>_volume`, which holds another tenant's million transactions, 100,000
// customers and their ledger (bench/volume.ts fills it the first time, about half an hour; kept for later runs).
{
  const admin = new URL(databaseUrl);
  const name = decodeURIComponent(admin.pathname.slice(1));
  admin.pathname = '/postgres';
  const quoted = (db: string) => `"${db.replace(/"/g, '""')}"`;
  const volume = new URL(databaseUrl);
  volume.pathname = `/${encodeURIComponent(`${name}_volume`)}`;
  if (process.env.BENCH_VOLUME === '1') await (await import('./volume.js')).fillVolume(volume.toString());
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect().catch((err: Error) => { throw new Error(`PostgreSQL is unreachable at ${admin.host}: ${err.message}`); });
  try {
    await client.query(`DROP DATABASE IF EXISTS ${quoted(name)} WITH (FORCE)`);
    if (process.env.BENCH_VOLUME === '1') {
      const began = performance.now();
      // PostgreSQL 15 copies through the WAL by default: tens of gigabytes written twice. Files copied instead.
      const fileCopy = Number((await client.query('SHOW server_version_num')).rows[0].server_version_num) >= 150000 ? ' STRATEGY = FILE_COPY' : '';
      await client.query(`CREATE DATABASE ${quoted(name)} TEMPLATE ${quoted(`${name}_volume`)}${fileCopy}`);
      process.stdout.write(`  database copied from ${name}_volume in ${((performance.now() - began) / 1000).toFixed(0)} s\n`);
    }
  } finally {
    await client.end();
  }
}
await ensureDatabase(databaseUrl);
await ensureRedis(redisUrl);
// This process only creates the business (as `npm run admin` would), in the service's database.
process.env.DATABASE_URL = databaseUrl;
// One business drives all the load: its key's limit (set when the key is made) would measure itself.
process.env.RATE_LIMIT_DEFAULT = '100000000';

// BENCH_FORMATION=pooler: web and each worker pool as its own process (the Procfile's formation, one dyno each), all
// through a PgBouncer of this run's own (transaction mode, its defaults) by DATABASE_CONNECTION_POOL_URL, migrations
// direct as the release phase runs them. Otherwise the service as npm start runs it (web, worker, settlement).
const FORMATION = process.env.BENCH_FORMATION === 'pooler' || process.env.BENCH_FORMATION === 'scaled' ? process.env.BENCH_FORMATION : 'npm-start';
const COPIES = FORMATION === 'scaled' ? 2 : 1;
// The web processes' ports (PORT + 1 is the webhook receiver's); the clients take turns between them.
const webPorts = Array.from({ length: COPIES }, (_, i) => (i === 0 ? PORT : PORT + 1 + i));
const apis = webPorts.map((port) => `http://127.0.0.1:${port}/api/v1/business`);
const serviceEnv = { ...process.env, DATABASE_URL: databaseUrl, REDIS_PREFIX: prefix, PORT: String(PORT), SANDBOX_STEP_MS: STEP_MS, WEBHOOKS_ALLOW_LOOPBACK: 'true' };
/** Resolves when every line in `ready` has been seen the given number of times on the children's output. */
function whenReady(children: ReturnType<typeof spawn>[], ready: [string, number][]): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const seen = new Map<string, number>();
    let tail = '';
    const onData = (d: Buffer) => {
      tail = (tail + d).slice(-65_536);
      for (const line of String(d).split('\n')) for (const [text] of ready) if (line.includes(text)) seen.set(text, (seen.get(text) ?? 0) + 1);
      if (ready.every(([text, n]) => (seen.get(text) ?? 0) >= n)) resolve();
    };
    for (const child of children) {
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.on('exit', (code) => reject(new Error(`a service process exited with ${code} before it was ready:\n${tail}`)));
    }
  });
}

type Running = { processes(): { name: string; pid: number }[]; stop(): Promise<void> };
async function startNpmStart(): Promise<Running> {
  // The service, as npm start runs it (its own migrations; the settlement pool alone reads the seeds).
  const service = spawn(process.execPath, ['--import', 'tsx', join(root, 'scripts/start.ts')], { cwd: root, env: serviceEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  // BENCH_SERVICE_LOG=<file>: the service's log lines (pino JSON) are kept there, to read what it did under load.
  if (process.env.BENCH_SERVICE_LOG) {
    const kept = createWriteStream(process.env.BENCH_SERVICE_LOG);
    service.stdout!.on('data', (chunk: Buffer) => kept.write(chunk));
    service.stderr!.on('data', (chunk: Buffer) => kept.write(chunk));
  }
  await whenReady([service], [['"web listening"', 1], ['"workers started"', 2]]);
  return {
    /** start.ts's children: web, the worker pools, the settlement pool. */
    processes() {
      const out = execFileSync('ps', ['--ppid', String(service.pid), '-o', 'pid=,args='], { encoding: 'utf8' });
      return out.trim().split('\n').map((line) => {
        const [, pid, args] = /^\s*(\d+)\s+(.*)$/.exec(line)!;
        const name = args.includes('api/main.ts') ? 'web' : / settlement$/.test(args) ? 'settlement' : 'worker';
        return { name, pid: Number(pid) };
      });
    },
    async stop() {
      service.kill('SIGTERM');
      await new Promise((resolve) => service.once('exit', resolve));
    },
  };
}
async function startPooledFormation(): Promise<Running> {
  const { startPgbouncer } = await import('../test/helpers/pgbouncer.js');
  const { POOLS } = await import('../shared/queues/registry.js');
  const bouncer = await startPgbouncer(databaseUrl);
  // The release phase: migrations, direct.
  execFileSync(process.execPath, ['--import', 'tsx', join(root, 'scripts/migrate.ts')], { cwd: root, env: serviceEnv, stdio: 'ignore' });
  const env = { ...serviceEnv, DATABASE_CONNECTION_POOL_URL: bouncer.url };
  const node = (args: string[], extra: Record<string, string> = {}) => spawn(process.execPath, ['--import', 'tsx', ...args], { cwd: root, env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] });
  // Each copy of a process is named apart (web, web 2, pricing, pricing 2, ...); its CPU counts under its kind.
  const copy = (name: string, i: number) => (i ? `${name} ${i + 1}` : name);
  const children = Array.from({ length: COPIES }, (_, i) => [
    { name: copy('web', i), proc: node([...WEB_NODE_FLAGS, 'api/main.ts'], { PORT: String(webPorts[i]) }) },
    ...POOLS.map((pool) => ({ name: copy(pool, i), proc: node(['workers/main.ts', pool]) })),
  ]).flat();
  await whenReady(children.map((c) => c.proc), [['"web listening"', COPIES], ['"workers started"', POOLS.length * COPIES]]);
  const clients = await bouncer.show('CLIENTS');
  process.stdout.write(`  PgBouncer lists ${clients.filter((c) => c.application_name === 'rampway').length} clients of the service once it is up\n`);
  return {
    processes: () => [...children.map((c) => ({ name: c.name, pid: c.proc.pid! })), { name: 'pgbouncer', pid: bouncer.pid }],
    async stop() {
      await Promise.all(children.map((c) => new Promise((resolve) => {
        c.proc.once('exit', resolve);
        c.proc.kill('SIGTERM');
      })));
      await bouncer.stop();
      const refused = bouncer.log().split('\n').filter((line) => /unsupported startup parameter|FATAL|prepared statement/.test(line));
      process.stdout.write(`  PgBouncer: ${refused.length} refused or failed logins or statements${refused.length ? `: ${refused.slice(0, 3).join(' | ')}` : ''}\n`);
    },
  };
}
const service = FORMATION === 'npm-start' ? await startNpmStart() : await startPooledFormation();
const serviceProcesses = () => service.processes();
const pids = (name: string) => execFileSync('pgrep', ['-x', name], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).map(Number);
const TICK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
/** CPU seconds a process has used (user + system), 0 when it is gone. */
function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICK;
  } catch {
    return 0;
  }
}
/**
 * CPU seconds so far by process. PostgreSQL: the backends serving this database (the service's pools, kept open), so
 * another database's work on the same server (a test run beside the benchmark) is not counted; its background
 * processes (WAL writer, checkpointer) are left out. Redis is one server for everything on the machine.
 */
async function cpuByProcess(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const p of serviceProcesses()) out[p.name.replace(/ \d+$/, '')] = (out[p.name.replace(/ \d+$/, '')] ?? 0) + cpuSeconds(p.pid);
  const backends = (await db.query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)).rows.map((r) => Number(r.pid));
  for (const pid of backends) out[`pg:${pid}`] = cpuSeconds(pid);
  out.redis = pids('redis-server').reduce((s, pid) => s + cpuSeconds(pid), 0);
  return out;
}
/** The CPU each process used between two readings, the database's backends summed as `postgresql`. */
function cpuBetween(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const name = k.startsWith('pg:') ? 'postgresql' : k;
    out[name] = (out[name] ?? 0) + v - (before[k] ?? 0);
  }
  return out;
}

const db = new pg.Client({ connectionString: databaseUrl });
await db.connect();
const redis = new Redis(redisUrl);

let turn = 0;
async function call(key: string, method: string, path: string, body?: object): Promise<{ status: number; body: any }> {
  const res = await fetch(`${apis[turn++ % apis.length]}${path}`, {
    method,
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', ...(method === 'GET' ? {} : { 'Idempotency-Key': randomUUID() }) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await res.json() };
}
async function ok(key: string, method: string, path: string, body?: object): Promise<any> {
  const res = await call(key, method, path, body);
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

// The webhook receiver: each transaction.completed (or failed) resolves its client's wait.
const waiting = new Map<string, (status: string) => void>();
const early = new Map<string, string>();
const hooks = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    res.writeHead(204).end();
    const event = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const done = waiting.get(event.data?.id);
    const status = event.type.replace('transaction.', '');
    if (done) done(status);
    else early.set(event.data?.id, status);
  });
});
await new Promise<void>((resolve) => hooks.listen(HOOK_PORT, '127.0.0.1', resolve));

// Setup through the API (not measured): a business, its webhook endpoint, a beneficiary, one funded wallet per client.
// The service's own admin command (its revision's), as an operator runs it.
const biz = JSON.parse(await runScript(root, 'scripts/admin.ts', ['create-business', '--name', 'Client bench', '--json'], { ...serviceEnv, LOG_LEVEL: 'silent' } as Record<string, string>));
const key = biz.keys.find((k: { environment: string }) => k.environment === 'sandbox')!.key;
// A polling client needs no webhook; a webhook-driven one hears of the off-ramp's end only.
if (WAIT === 'webhook') await ok(key, 'POST', '/webhook-endpoints', { url: `http://127.0.0.1:${HOOK_PORT}/hooks`, events: ['transaction.completed', 'transaction.failed'] });
const beneficiary = await ok(key, 'POST', '/beneficiaries', {
  currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Bench Payee', details: { phone_number: '+254722480163', mobile_network: 'safaricom' },
});
const wallets: string[] = [];
for (let i = 0; i < CLIENTS; i += 20) {
  await Promise.all(Array.from({ length: Math.min(20, CLIENTS - i) }, async () => {
    const customer = await ok(key, 'POST', '/customers', { external_reference: `bench-${randomUUID()}` });
    await ok(key, 'POST', `/sandbox/wallets/${customer.wallet.id}/fund`, { chain: 'base', amount: '100000' });
    wallets.push(customer.wallet.id);
  }));
}

/** Where a client stops waiting: the off-ramp has ended, or waits for someone to act. */
const ENDED = ['completed', 'failed', 'action_required'];

/** One off-ramp as a client runs it: quote (waiting for its price if it comes later), create, wait for the webhook. */
async function lifecycle(wallet: string): Promise<{ ms: number; status: string }> {
  const started = performance.now();
  let quote = await ok(key, 'POST', '/quotes', { direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '10', beneficiary_id: beneficiary.id });
  while (quote.status === 'pending') {
    await new Promise((r) => setTimeout(r, 100));
    quote = await ok(key, 'GET', `/quotes/${quote.id}`);
  }
  const tx = await ok(key, 'POST', '/offramps', { quote_id: quote.id, funding_source: { wallet_id: wallet } });
  if (WAIT === 'poll') {
    for (;;) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      const now = await ok(key, 'GET', `/transactions/${tx.id}`);
      if (ENDED.includes(now.status)) return { ms: performance.now() - started, status: now.status };
    }
  }
  const status = await new Promise<string>((resolve) => {
    const seen = early.get(tx.id);
    if (seen) return resolve(seen);
    waiting.set(tx.id, resolve);
    // A webhook that never comes is not waited for forever: the API is asked, slowly.
    const poll = setInterval(async () => {
      const now = await call(key, 'GET', `/transactions/${tx.id}`);
      if (ENDED.includes(now.body.status)) resolve(now.body.status);
    }, 30_000);
    waiting.set(tx.id, (s) => {
      clearInterval(poll);
      resolve(s);
    });
  });
  waiting.delete(tx.id);
  early.delete(tx.id);
  return { ms: performance.now() - started, status };
}

async function run(clients: number, total: number): Promise<{ seconds: number; latencies: number[]; completed: number }> {
  let next = 0;
  const latencies: number[] = [];
  let completed = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    while (next < total) {
      next += 1;
      const r = await lifecycle(wallets[c]);
      latencies.push(r.ms);
      if (r.status === 'completed') completed += 1;
    }
  }));
  return { seconds: (performance.now() - start) / 1000, latencies: latencies.sort((a, b) => a - b), completed };
}
const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))];

// The latency floor: one lifecycle at a time.
await run(1, 5);
const alone = await run(1, 20);
// The warm-up (BENCH_WARMUP, above): under the full load, not counted.
const WARMUP = Number(process.env.BENCH_WARMUP ?? 1000);
if (WARMUP > 0) await run(CLIENTS, WARMUP);

// Counters before and after the measured run.
const queueNames = ['pricing', 'settlement', 'providers', 'sandbox', 'webhooks'];
async function jobCounts(): Promise<number> {
  let n = 0;
  for (const q of queueNames) n += await redis.zcard(`${prefix}:${q}:completed`);
  return n;
}
async function redisCalls(): Promise<Record<string, number>> {
  const info = await redis.info('commandstats');
  return Object.fromEntries([...info.matchAll(/cmdstat_([^:]+):calls=(\d+)/g)].map((m) => [m[1], Number(m[2])]));
}
// Statements the service ran in this database, from pg_stat_statements when the server loads it (transaction control
// such as BEGIN and COMMIT, and this benchmark's own readings of pg_stat views, left out); null when it does not.
const countsStatements = (await db.query(`SELECT current_setting('shared_preload_libraries') ~ 'pg_stat_statements' AS loaded`)).rows[0].loaded as boolean;
if (countsStatements) await db.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
/** The service's statements so far, each text with its calls (this database's, transaction control left out). */
async function statementCounts(): Promise<Map<string, number> | null> {
  if (!countsStatements) return null;
  const { rows } = await db.query(`SELECT query, sum(calls) AS n FROM pg_stat_statements
    WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND query !~* '^\\s*(BEGIN|START TRANSACTION|COMMIT|ROLLBACK|SET LOCAL|SAVEPOINT|RELEASE)' AND query !~ 'pg_stat_|pg_backend_pid'
    GROUP BY query`);
  return new Map(rows.map((r) => [r.query as string, Number(r.n)]));
}
async function dbCounters(): Promise<{ xacts: number; tables: Record<string, number> }> {
  const [{ xacts }] = (await db.query(`SELECT xact_commit + xact_rollback AS xacts FROM pg_stat_database WHERE datname = current_database()`)).rows;
  const tables = Object.fromEntries((await db.query(`SELECT relname, n_tup_ins + n_tup_upd + n_tup_del AS w FROM pg_stat_user_tables`)).rows.map((r) => [r.relname, Number(r.w)]));
  return { xacts: Number(xacts), tables };
}
const jobs0 = await jobCounts();
const calls0 = await redisCalls();
const db0 = await dbCounters();
const statements0 = await statementCounts();
const cpu0 = await cpuByProcess();
const loaded = await run(CLIENTS, LIFECYCLES);
const cpu1 = await cpuByProcess();
// pg_stat counters are sent by each backend when its transaction ends and flushed about once a second.
await new Promise((r) => setTimeout(r, 1500));
const db1 = await dbCounters();
const statements1 = await statementCounts();
const jobs = (await jobCounts()) - jobs0;
const calls1 = await redisCalls();
const byCommand = Object.entries(calls1).map(([c, n]) => [c, n - (calls0[c] ?? 0)] as const).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
const calls = byCommand.reduce((s, [, n]) => s + n, 0);

const perSecond = loaded.completed / loaded.seconds;
const cpu = cpuBetween(cpu0, cpu1);
const cpuTotal = Object.values(cpu).reduce((s, v) => s + v, 0);
const writes = Object.entries(db1.tables).map(([t, w]) => [t, (w - (db0.tables[t] ?? 0)) / LIFECYCLES] as const).filter(([, w]) => w >= 0.05).sort((a, b) => b[1] - a[1]);
const floorMs = pct(alone.latencies, 0.5);
const loadedP50 = pct(loaded.latencies, 0.5);
// Little's law: clients / throughput is the time each lifecycle took; far above the floor, they waited for capacity.
const kind = loadedP50 > 2 * floorMs ? 'capacity (under load a lifecycle took far longer than alone: the clients waited for the service)' : 'latency (a lifecycle took about as long as alone: more clients would go faster)';

const byStatement = statements0 && statements1
  ? [...statements1].map(([text, n]) => [text, (n - (statements0.get(text) ?? 0)) / LIFECYCLES] as const).filter(([, n]) => n >= 0.05).sort((a, b) => b[1] - a[1])
  : null;
// What the deferred integrity triggers run at COMMIT (a ledger entry balanced, a settlement's received amount equal to
// its transfers) pg_stat_statements lists as statements of their own; they are PostgreSQL's work, not statements the
// service sends, so they are counted apart: a text found in a trigger function's body.
const triggerBodies = countsStatements
  ? ((await db.query(`SELECT string_agg(prosrc, ' ') AS src FROM pg_proc WHERE prorettype = 'trigger'::regtype AND pronamespace = 'public'::regnamespace`)).rows[0].src as string ?? '').replace(/\s+/g, ' ')
    // PL/pgSQL's SELECT ... INTO reaches PostgreSQL without its INTO.
    .replace(/ INTO \w+(, \w+)* /gi, ' ')
  : '';
const inTrigger = (text: string) => triggerBodies.includes(text.replace(/\s+/g, ' ').split('$')[0].trim());
const statements = byStatement && byStatement.filter(([text]) => !inTrigger(text)).reduce((sum, [, n]) => sum + n, 0);
const triggerStatements = byStatement && byStatement.filter(([text]) => inTrigger(text)).reduce((sum, [, n]) => sum + n, 0);
const transactions = (db1.xacts - db0.xacts) / LIFECYCLES;
const cpuMs = (cpuTotal * 1000) / LIFECYCLES;
// Issue 39's goals for a lifecycle, judged on this run's figures (a figure not measured is not met).
const goal = (name: string, figure: number | null, unit: string, target: number, atMost = false) =>
  ({ name, goal: `${atMost ? '<=' : '>='} ${target}${unit}`, figure: figure === null ? null : Number(figure.toFixed(1)), met: figure !== null && (atMost ? figure <= target : figure >= target) });
const goals = [
  goal(`lifecycles, ${WAIT === 'poll' ? `polling with ${CLIENTS} clients` : `webhook-driven, ${CLIENTS} clients`}`, perSecond, '/s', WAIT === 'poll' ? 120 : 150),
  goal('lifecycles, the end goal', perSecond, '/s', 300),
  goal('CPU per lifecycle across the processes', cpuMs, ' ms', 10, true),
  goal('statements sent per lifecycle', statements, '', 30, true),
  goal('database transactions per lifecycle', transactions, '', 6, true),
];
const formation = {
  'npm-start': 'npm start (web, worker, settlement processes)',
  pooler: 'web and each of the five pools its own process, all through PgBouncer (transaction mode, defaults)',
  scaled: 'two web processes and two of each of the five pools, all through one PgBouncer (transaction mode, defaults)',
}[FORMATION];
const lines = [
  `pipeline as a client sees it: ${formation}, SANDBOX_STEP_MS=${STEP_MS}, base's 12 confirmations; ${CLIENTS} clients, ${LIFECYCLES} off-ramps (quote, create, ${WAIT === 'poll' ? `GET every ${POLL_MS} ms until it ends` : 'webhook'}) after ${WARMUP} not counted`,
  `  alone: one lifecycle p50 ${floorMs.toFixed(0)} ms`,
  `  lifecycles completed          ${perSecond.toFixed(1).padStart(7)} /s (${loaded.completed}/${LIFECYCLES} completed in ${loaded.seconds.toFixed(1)} s; goal 300/s); e2e p50 ${(loadedP50 / 1000).toFixed(2)} s, p99 ${(pct(loaded.latencies, 0.99) / 1000).toFixed(2)} s`,
  `  the figure is ${kind}`,
  `  CPU per lifecycle (ms): ${Object.entries(cpu).map(([k, v]) => `${k} ${((v * 1000) / LIFECYCLES).toFixed(1)}`).join(', ')}; total ${((cpuTotal * 1000) / LIFECYCLES).toFixed(1)} ms (${(cpuTotal / loaded.seconds).toFixed(2)} cores busy)`,
  `  per lifecycle: ${transactions.toFixed(1)} database transactions, ${statements === null ? 'statements not counted (pg_stat_statements is not in shared_preload_libraries)' : `${statements.toFixed(1)} statements sent (and ${triggerStatements!.toFixed(1)} run by deferred integrity triggers at commit)`}, ${(jobs / LIFECYCLES).toFixed(1)} BullMQ jobs, ${(calls / LIFECYCLES).toFixed(0)} Redis commands`,
  `  Redis commands per lifecycle by command: ${byCommand.slice(0, 8).map(([c, n]) => `${c} ${(n / LIFECYCLES).toFixed(0)}`).join(', ')}`,
  `  row writes per lifecycle by table: ${writes.map(([t, w]) => `${t} ${w.toFixed(1)}`).join(', ')}`,
  // BENCH_STATEMENTS=1: each statement text with its calls per lifecycle, most called first.
  ...(process.env.BENCH_STATEMENTS === '1' && byStatement ? ['  statements per lifecycle by text:', ...byStatement.map(([text, n]) => `    ${n.toFixed(2).padStart(6)}  ${inTrigger(text) ? '(trigger) ' : ''}${text.replace(/\s+/g, ' ').slice(0, 150)}`)] : []),
  '  goals:',
  ...goals.map((g) => `    ${g.name.padEnd(48)} ${g.goal.padEnd(9)} ${String(g.figure ?? 'not measured').padStart(12)}  ${g.met ? 'met' : 'not met'}`),
  '',
];
process.stdout.write(lines.join('\n'));
const resultsFile = join(import.meta.dirname, 'results.json');
const results = existsSync(resultsFile) ? JSON.parse(readFileSync(resultsFile, 'utf8')) : {};
results[['pipeline_client', FORMATION === 'npm-start' ? '' : FORMATION, WAIT === 'poll' ? 'poll' : '', process.env.BENCH_VOLUME === '1' ? 'volume' : ''].filter(Boolean).join('_')] = {
  measured_at: new Date().toISOString(),
  clients: CLIENTS,
  lifecycles: LIFECYCLES,
  sandbox_step_ms: Number(STEP_MS),
  lifecycles_per_second: Number(perSecond.toFixed(1)),
  lifecycles_goal_per_second: 300,
  e2e_p50_ms: Math.round(loadedP50),
  e2e_p99_ms: Math.round(pct(loaded.latencies, 0.99)),
  alone_p50_ms: Math.round(floorMs),
  warmup_lifecycles: WARMUP,
  bound_by: kind.split(' ')[0],
  cpu_ms_per_lifecycle: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, Number(((v * 1000) / LIFECYCLES).toFixed(1))])),
  wait: WAIT,
  formation: FORMATION,
  db_transactions_per_lifecycle: Number(transactions.toFixed(1)),
  statements_per_lifecycle: statements === null ? null : Number(statements.toFixed(1)),
  trigger_statements_per_lifecycle: triggerStatements === null ? null : Number(triggerStatements.toFixed(1)),
  jobs_per_lifecycle: Number((jobs / LIFECYCLES).toFixed(1)),
  redis_commands_per_lifecycle: Math.round(calls / LIFECYCLES),
  goals,
};
writeFileSync(resultsFile, `${JSON.stringify(results, null, 2)}\n`);

await service.stop();
hooks.close();
await db.end();
redis.disconnect();
process.exit(0);
