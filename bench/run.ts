// npm run bench: authenticated GET throughput against a bare Express hello world, on this machine.
// Uses its own database (rampway_bench) and Redis prefix, so it never touches a running instance.
import { spawn, type ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import { ensureDatabase, ensureRedis } from '../scripts/preflight.js';

const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const env = {
  ...process.env,
  DATABASE_URL: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/rampway_bench',
  REDIS_PREFIX: `rampway-bench-${Date.now().toString(36)}`,
  LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
  RATE_LIMIT_DEFAULT: '100000000',
};

function start(script: string, port: number, ready: string): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn('node_modules/.bin/tsx', [script], { env: { ...env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'inherit'] });
    let seen = '';
    const onData = (d: Buffer) => {
      seen += d;
      if (seen.includes(ready)) {
        // Keep draining stdout (request logs) so the server never blocks on a full pipe.
        child.stdout!.off('data', onData);
        child.stdout!.resume();
        resolve(child);
      }
    };
    child.stdout!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}

async function load(url: string, headers: Record<string, string> = {}, extra: Partial<autocannon.Options> = {}): Promise<autocannon.Result> {
  // Warm up first so JIT and caches are in their steady state.
  await autocannon({ url, headers, connections: CONNECTIONS, duration: 2, ...extra });
  return autocannon({ url, headers, connections: CONNECTIONS, duration: DURATION, ...extra });
}

let writes = 0;
/** Every request a new customer: its own Idempotency-Key and external_reference. */
function customerRequest(key: string): autocannon.Request {
  writes += 1;
  const id = `${process.pid}-${Date.now().toString(36)}-${writes}`;
  return {
    method: 'POST',
    path: '/api/v1/business/customers',
    headers: { Authorization: `Bearer ${key}`, 'Idempotency-Key': `bench-${id}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ external_reference: `bench-${id}` }),
  } as autocannon.Request;
}

function summary(name: string, r: autocannon.Result): string {
  return `${name.padEnd(28)} ${r.requests.average.toFixed(0).padStart(7)} req/s   p50 ${r.latency.p50} ms   p99 ${r.latency.p99} ms   non-2xx ${r.non2xx}   errors ${r.errors}`;
}

await ensureDatabase(env.DATABASE_URL);
await ensureRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
// Migrate and create a business through the same code the service uses.
Object.assign(process.env, env);
const { createDataSource, runMigrations } = await import('../shared/db/data-source.js');
const { createBusiness } = await import('../shared/admin/commands.js');
const { getConfig } = await import('../shared/config.js');
const ds = createDataSource({ poolSize: 2 });
await ds.initialize();
await runMigrations(ds);
const biz = await createBusiness({ ds, config: getConfig() }, { name: 'Bench Co' });
await ds.destroy();
const key = biz.keys.find((k) => k.environment === 'sandbox')!.key;

const hello = await start('bench/hello.ts', 3901, 'listening');
const helloResult = await load('http://127.0.0.1:3901/');
hello.kill('SIGTERM');

const api = await start('api/main.ts', 3902, 'web listening');
const accountResult = await load('http://127.0.0.1:3902/api/v1/business/account', { Authorization: `Bearer ${key}` });
// Writes: customer + managed wallet (HD derivation) in one transaction, idempotency claimed and stored.
const writeResult = await load('http://127.0.0.1:3902/api/v1/business/customers', {}, {
  // Per-request headers replace the defaults, so the key travels in each request.
  requests: [{ setupRequest: (req: autocannon.Request) => ({ ...req, ...customerRequest(key) }) }] as unknown as autocannon.Request[],
});
api.kill('SIGTERM');

const ratio = accountResult.requests.average / helloResult.requests.average;
process.stdout.write(
  [
    `connections ${CONNECTIONS}, ${DURATION} s each, LOG_LEVEL=${env.LOG_LEVEL}`,
    summary('express hello world', helloResult),
    summary('GET /account (auth+rl)', accountResult),
    summary('POST /customers (write)', writeResult),
    `ratio ${(ratio * 100).toFixed(1)}% (goal >= 40%)`,
    '',
  ].join('\n'),
);
process.exit(accountResult.non2xx + accountResult.errors + writeResult.non2xx + writeResult.errors > 0 ? 1 : 0);
