// npm run bench:writes: creates per second through the API, `POST /customers` and `POST /offramps` (each request its
// own Idempotency-Key and body), the web process beside the worker pools as `npm start` runs them. An off-ramp needs an
// available quote of its own: one is priced through the API, then cloned in SQL (BENCH_QUOTES per round), so the load
// measures the off-ramp's own path (quote consumed, transaction, settlement, outbox, idempotency record), funded from a
// verified external wallet (nothing runs after the answer but the settlement's expiry, an hour later).
// Own database (BENCH_DATABASE_URL, default rampway_bench) and Redis prefix; prints a table and the figures as JSON.
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ensureDatabase, ensureRedis } from '../scripts/preflight.js';
import { startProcess, stopProcess, type Started } from '../test/helpers/processes.js';
import { apiCaller } from './seed.js';

const DURATION = Number(process.env.BENCH_SECONDS ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const QUOTES = Number(process.env.BENCH_QUOTES ?? 6_000);
const PORT = process.env.BENCH_PORT ?? '3932';
const env: Record<string, string> = {
  ...(process.env as Record<string, string>),
  DATABASE_URL: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/rampway_bench',
  REDIS_PREFIX: `rampway-bench-w-${Date.now().toString(36)}`,
  LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
  RATE_LIMIT_DEFAULT: '100000000',
  SANDBOX_STEP_MS: '0',
  SETTLEMENT_TTL_SECONDS: '3600',
};
const api = `http://127.0.0.1:${PORT}/api/v1/business`;

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
/** Every request its own Idempotency-Key and body, as a client creating many resources sends them. */
function uniqueWrites(key: string, path: string, body: (n: number) => object): autocannon.Options {
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
    }] as unknown as autocannon.Request[],
  };
}

await ensureDatabase(env.DATABASE_URL);
await ensureRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
Object.assign(process.env, env);
const { createDataSource, runMigrations } = await import('../shared/db/data-source.js');
const ds = createDataSource({ poolSize: 2 });
await ds.initialize();
await runMigrations(ds);
const started: Started[] = [];
try {
  started.push(await startProcess('api/main.ts', { ...env, PORT }, 'web listening'));
  started.push(await startProcess('workers/main.ts', env, 'workers started'));

  const { createBusiness } = await import('../shared/admin/commands.js');
  const { getConfig } = await import('../shared/config.js');
  const biz = await createBusiness({ ds, config: getConfig() }, { name: 'Bench Writes' });
  const key = biz.keys.find((k) => k.environment === 'sandbox')!.key;
  const call = apiCaller(api, key);
  const account = privateKeyToAccount(generatePrivateKey());
  const wallet = await call('POST', '/wallets', { address: account.address, chain: 'base' });
  const challenge = await call('POST', `/wallets/${wallet.id}/verification-challenges`);
  await call('POST', `/wallets/${wallet.id}/verify`, { challenge_id: challenge.id, signature: await account.signMessage({ message: challenge.message }) });
  const beneficiary = await call('POST', '/beneficiaries', {
    currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Bench Payee', details: { phone_number: '+254722480163', mobile_network: 'safaricom' },
  });
  let quote = await call('POST', '/quotes', { direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '25', beneficiary_id: beneficiary.id });
  for (let tries = 0; quote.status === 'pending'; tries++) {
    if (tries > 300) throw new Error(`seeding: quote ${quote.id} stayed pending`);
    await new Promise((r) => setTimeout(r, 100));
    quote = await call('GET', `/quotes/${quote.id}`);
  }
  const columns: string[] = (await ds.query(`SELECT column_name FROM information_schema.columns WHERE table_name = 'quotes' AND table_schema = current_schema() ORDER BY ordinal_position`))
    .map((c: { column_name: string }) => c.column_name);
  /** `n` copies of the priced quote, available for an hour: the off-ramps' inputs, one each. */
  const cloneQuotes = async (n: number): Promise<string[]> => {
    const values = columns.map((c) => (c === 'id' ? 'gen_random_uuid()' : c === 'expires_at' ? `now() + interval '1 hour'` : c));
    const rows: { id: string }[] = await ds.query(
      `INSERT INTO quotes (${columns.join(', ')}) SELECT ${values.join(', ')} FROM quotes CROSS JOIN generate_series(1, $2) WHERE id = $1 RETURNING id`,
      [quote.id, n],
    );
    return rows.map((r) => r.id);
  };

  const scenarios: { name: string; run: () => Promise<autocannon.Result> }[] = [
    { name: 'POST /customers', run: () => autocannon(uniqueWrites(key, '/customers', (n) => ({ external_reference: `bench-${process.pid}-${n}` }))) },
    {
      name: 'POST /offramps',
      run: async () => {
        const quotes = await cloneQuotes(QUOTES);
        let next = 0;
        return autocannon(uniqueWrites(key, '/offramps', () => ({ quote_id: quotes[next++ % quotes.length], funding_source: { wallet_id: wallet.id } })));
      },
    },
  ];
  // Warm-up: JIT, prepared statements and pools in their steady state before anything counts.
  await autocannon({ ...uniqueWrites(key, '/customers', (n) => ({ external_reference: `warm-${process.pid}-${n}` })), duration: 2 });
  // CPU per request, which other work on a shared machine moves far less than requests per second: the web process's,
  // and that of this database's PostgreSQL backends (the web process's pool; the workers' too, idle here).
  const web = started[0].child.pid!;
  const backends = async () => (await ds.query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)).map((r: { pid: number }) => r.pid) as number[];
  const cpu = async () => ({ web: cpuSeconds(web), pg: (await backends()).reduce((sum, pid) => sum + cpuSeconds(pid), 0) });
  const results: Record<string, { rps: number[]; p50: number[]; p99: number[]; webMs: number[]; pgMs: number[]; failures: number }> = {};
  for (let round = 1; round <= ROUNDS; round++) {
    for (const s of scenarios) {
      const before = await cpu();
      const r = await s.run();
      const after = await cpu();
      const row = (results[s.name] ??= { rps: [], p50: [], p99: [], webMs: [], pgMs: [], failures: 0 });
      row.webMs.push(((after.web - before.web) * 1000) / r.requests.total);
      row.pgMs.push(((after.pg - before.pg) * 1000) / r.requests.total);
      row.rps.push(r.requests.average);
      row.p50.push(r.latency.p50);
      row.p99.push(r.latency.p99);
      row.failures += r.non2xx + r.errors + r.timeouts;
    }
    process.stderr.write(`round ${round}/${ROUNDS} done\n`);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const [records] = await ds.query(`SELECT count(*)::int AS n, pg_total_relation_size('idempotency_records') AS bytes FROM idempotency_records`).catch(() => [null]);
  process.stdout.write([
    `| measure (median of ${ROUNDS} rounds, ${CONNECTIONS} connections, ${DURATION} s each) | req/s | p50 ms | p99 ms | web CPU ms per request | PostgreSQL CPU ms per request | failed |`,
    '|---|---:|---:|---:|---:|---:|---:|',
    ...Object.entries(results).map(([name, r]) =>
      `| ${name} | ${Math.round(median(r.rps))} | ${median(r.p50)} | ${median(r.p99)} | ${median(r.webMs).toFixed(2)} | ${median(r.pgMs).toFixed(2)} | ${r.failures} |`),
  ].join('\n') + '\n');
  const perRound = (pick: (r: (typeof results)[string]) => number[]) => Object.fromEntries(Object.entries(results).map(([n, r]) => [n, pick(r).map((x) => Number(x.toFixed(2)))]));
  process.stdout.write(`${JSON.stringify({ rps: perRound((r) => r.rps), webMs: perRound((r) => r.webMs), pgMs: perRound((r) => r.pgMs), idempotency_records: records })}\n`);
  process.exitCode = Object.values(results).some((r) => r.failures) ? 1 : 0;
} finally {
  for (const child of started.reverse()) await stopProcess(child);
  await ds.destroy();
}
