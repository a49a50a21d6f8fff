// npm run bench:pipeline, first line: sandbox off-ramp lifecycles per second as a client meets the service. The
// service runs as `npm start` runs it (web, the worker pools and the settlement pool as their own processes), with its
// defaults (confirmations: base's 12) but a short sandbox step (BENCH_STEP_MS, 20 ms); BENCH_CLIENTS concurrent clients
// each quote, create an off-ramp from their funded managed wallet and wait for its `transaction.completed` webhook,
// then start the next. Only the API is used. It first measures a lifecycle alone (the latency floor), so the figure
// can say whether it is capacity (clients waited in queues) or latency (clients waited for the lifecycle's own steps).
// Beside the figure: where the CPU went per process (web, worker, settlement, PostgreSQL, Redis) and per lifecycle the
// database transactions, row writes, BullMQ jobs and Redis commands. Own database and Redis prefix. BENCH_FORMATION=pooler
// runs web and each pool as its own process through a PgBouncer (npm run bench:pooler runs both, one after the other).
import { spawn, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import pg from 'pg';
import { ensureDatabase, ensureRedis } from '../scripts/preflight.js';
import { checkoutRevision, runScript } from './baseline.js';

const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 200);
const LIFECYCLES = Number(process.env.BENCH_CLIENT_LIFECYCLES ?? 3000);
const STEP_MS = process.env.BENCH_STEP_MS ?? '20';
const PORT = Number(process.env.BENCH_PORT ?? 3921);
const HOOK_PORT = PORT + 1;
const databaseUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/rampway_bench_client';
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `rampway-client-bench-${Date.now().toString(36)}`;
const api = `http://127.0.0.1:${PORT}/api/v1/business`;
// BENCH_REVISION=<git revision>: the service of that revision (a worktree of its own, bench/baseline.ts) instead of
// this checkout's, measured by this client: a figure "before" (the kernel issue's pipeline at 0f16dc5) against "after".
const root = process.env.BENCH_REVISION ? checkoutRevision(process.env.BENCH_REVISION) : join(import.meta.dirname, '..');

// An empty database each run: a table that grows from run to run would make one run's figures incomparable with the next.
{
  const admin = new URL(databaseUrl);
  const name = decodeURIComponent(admin.pathname.slice(1));
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect().catch((err: Error) => { throw new Error(`PostgreSQL is unreachable at ${admin.host}: ${err.message}`); });
  await client.query(`DROP DATABASE IF EXISTS "${name.replace(/"/g, '""')}" WITH (FORCE)`).finally(() => client.end());
}
await ensureDatabase(databaseUrl);
await ensureRedis(redisUrl);
// This process only creates the business (as `npm run admin` would), in the service's database.
process.env.DATABASE_URL = databaseUrl;
// One business drives all the load: its key's limit (set when the key is made) would measure itself.
process.env.RATE_LIMIT_DEFAULT = '100000000';
// BENCH_VOLUME=1: another tenant's million transactions in the same tables first (bench/volume.ts), made anew each run.
if (process.env.BENCH_VOLUME === '1') await (await import('./volume.js')).fillVolume(databaseUrl);

// BENCH_FORMATION=pooler: web and each worker pool as its own process (the Procfile's formation, one dyno each), all
// through a PgBouncer of this run's own (transaction mode, its defaults) by DATABASE_CONNECTION_POOL_URL, migrations
// direct as the release phase runs them. Otherwise the service as npm start runs it (web, worker, settlement).
const FORMATION = process.env.BENCH_FORMATION === 'pooler' ? 'pooler' : 'npm-start';
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
  const node = (args: string[]) => spawn(process.execPath, ['--import', 'tsx', ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const children = [{ name: 'web', proc: node(['api/main.ts']) }, ...POOLS.map((pool) => ({ name: pool, proc: node(['workers/main.ts', pool]) }))];
  await whenReady(children.map((c) => c.proc), [['"web listening"', 1], ['"workers started"', POOLS.length]]);
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
const service = FORMATION === 'pooler' ? await startPooledFormation() : await startNpmStart();
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
  for (const p of serviceProcesses()) out[p.name] = (out[p.name] ?? 0) + cpuSeconds(p.pid);
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

async function call(key: string, method: string, path: string, body?: object): Promise<{ status: number; body: any }> {
  const res = await fetch(`${api}${path}`, {
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
await ok(key, 'POST', '/webhook-endpoints', { url: `http://127.0.0.1:${HOOK_PORT}/hooks`, events: ['transaction.completed', 'transaction.failed'] });
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

/** One off-ramp as a client runs it: quote (waiting for its price if it comes later), create, wait for the webhook. */
async function lifecycle(wallet: string): Promise<{ ms: number; status: string }> {
  const started = performance.now();
  let quote = await ok(key, 'POST', '/quotes', { direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '10', beneficiary_id: beneficiary.id });
  while (quote.status === 'pending') {
    await new Promise((r) => setTimeout(r, 100));
    quote = await ok(key, 'GET', `/quotes/${quote.id}`);
  }
  const tx = await ok(key, 'POST', '/offramps', { quote_id: quote.id, funding_source: { wallet_id: wallet } });
  const status = await new Promise<string>((resolve) => {
    const seen = early.get(tx.id);
    if (seen) return resolve(seen);
    waiting.set(tx.id, resolve);
    // A webhook that never comes is not waited for forever: the API is asked, slowly.
    const poll = setInterval(async () => {
      const now = await call(key, 'GET', `/transactions/${tx.id}`);
      if (['completed', 'failed', 'action_required'].includes(now.body.status)) resolve(now.body.status);
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
async function dbCounters(): Promise<{ xacts: number; tables: Record<string, number> }> {
  const [{ xacts }] = (await db.query(`SELECT xact_commit + xact_rollback AS xacts FROM pg_stat_database WHERE datname = current_database()`)).rows;
  const tables = Object.fromEntries((await db.query(`SELECT relname, n_tup_ins + n_tup_upd + n_tup_del AS w FROM pg_stat_user_tables`)).rows.map((r) => [r.relname, Number(r.w)]));
  return { xacts: Number(xacts), tables };
}
const jobs0 = await jobCounts();
const calls0 = await redisCalls();
const db0 = await dbCounters();
const cpu0 = await cpuByProcess();
const loaded = await run(CLIENTS, LIFECYCLES);
const cpu1 = await cpuByProcess();
// pg_stat counters are sent by each backend when its transaction ends and flushed about once a second.
await new Promise((r) => setTimeout(r, 1500));
const db1 = await dbCounters();
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

const lines = [
  `pipeline as a client sees it: ${FORMATION === 'pooler' ? 'web and each of the five pools its own process, all through PgBouncer (transaction mode, defaults)' : 'npm start (web, worker, settlement processes)'}, SANDBOX_STEP_MS=${STEP_MS}, base's 12 confirmations; ${CLIENTS} clients, ${LIFECYCLES} off-ramps (quote, create, webhook)`,
  `  alone: one lifecycle p50 ${floorMs.toFixed(0)} ms`,
  `  lifecycles completed          ${perSecond.toFixed(1).padStart(7)} /s (${loaded.completed}/${LIFECYCLES} completed in ${loaded.seconds.toFixed(1)} s; goal 300/s); e2e p50 ${(loadedP50 / 1000).toFixed(2)} s, p99 ${(pct(loaded.latencies, 0.99) / 1000).toFixed(2)} s`,
  `  the figure is ${kind}`,
  `  CPU per lifecycle (ms): ${Object.entries(cpu).map(([k, v]) => `${k} ${((v * 1000) / LIFECYCLES).toFixed(1)}`).join(', ')}; total ${((cpuTotal * 1000) / LIFECYCLES).toFixed(1)} ms (${(cpuTotal / loaded.seconds).toFixed(2)} cores busy)`,
  `  per lifecycle: ${((db1.xacts - db0.xacts) / LIFECYCLES).toFixed(1)} database transactions, ${(jobs / LIFECYCLES).toFixed(1)} BullMQ jobs, ${(calls / LIFECYCLES).toFixed(0)} Redis commands`,
  `  Redis commands per lifecycle by command: ${byCommand.slice(0, 8).map(([c, n]) => `${c} ${(n / LIFECYCLES).toFixed(0)}`).join(', ')}`,
  `  row writes per lifecycle by table: ${writes.map(([t, w]) => `${t} ${w.toFixed(1)}`).join(', ')}`,
  '',
];
process.stdout.write(lines.join('\n'));
const resultsFile = join(import.meta.dirname, 'results.json');
const results = existsSync(resultsFile) ? JSON.parse(readFileSync(resultsFile, 'utf8')) : {};
results[FORMATION === 'pooler' ? 'pipeline_client_pooler' : 'pipeline_client'] = {
  measured_at: new Date().toISOString(),
  clients: CLIENTS,
  lifecycles: LIFECYCLES,
  sandbox_step_ms: Number(STEP_MS),
  lifecycles_per_second: Number(perSecond.toFixed(1)),
  lifecycles_goal_per_second: 300,
  e2e_p50_ms: Math.round(loadedP50),
  e2e_p99_ms: Math.round(pct(loaded.latencies, 0.99)),
  alone_p50_ms: Math.round(floorMs),
  bound_by: kind.split(' ')[0],
  cpu_ms_per_lifecycle: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, Number(((v * 1000) / LIFECYCLES).toFixed(1))])),
  db_transactions_per_lifecycle: Number(((db1.xacts - db0.xacts) / LIFECYCLES).toFixed(1)),
  jobs_per_lifecycle: Number((jobs / LIFECYCLES).toFixed(1)),
  redis_commands_per_lifecycle: Math.round(calls / LIFECYCLES),
};
writeFileSync(resultsFile, `${JSON.stringify(results, null, 2)}\n`);

await service.stop();
hooks.close();
await db.end();
redis.disconnect();
process.exit(0);
