// npm run bench:csv (and the end of npm run bench): the CSV exports (CONTRACT 16) of 100,000 rows, streamed by the web
// process in its own process as the Procfile runs it, while this process samples its resident memory (VmRSS). The
// transactions export is read twice: as fast as this process parses it, then slowly (a pause every few hundred rows),
// so the server has to wait on a full socket (backpressure) rather than buffer what the client has not read. Each export
// runs twice: in a web process as the Procfile starts it, whose V8 heap grows its old generation with the garbage rows
// leave before it collects (RSS there grows with the rows although nothing holds them), and in one whose heap is capped
// at HEAP_CAP_MB: an export holding its rows could not finish there. Flat: every capped export finishes whole with
// its peak resident memory within BOUND_MB of the idle process's.
// The rows are copies of real ones: one off-ramp made through the API (quote, settlement and its transfer, history),
// then cloned with INSERT ... SELECT generate_series, so the export's query and view read what production rows hold.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { parse } from 'csv-parse';
import { ensureDatabase, ensureRedis } from '../scripts/preflight.js';
import { startProcess, stopProcess, type Started } from '../test/helpers/processes.js';
import { seedBench } from './seed.js';

const ROWS = Number(process.env.BENCH_CSV_ROWS ?? 100_000);
/** Journal entries cloned for the ledger export: two postings (two CSV rows) each; 0 skips the ledger export. */
const LEDGER_ENTRIES = Number(process.env.BENCH_CSV_LEDGER_ENTRIES ?? ROWS / 2);
/** The most the web process's resident memory may rise above its idle level during an export. */
const BOUND_MB = Number(process.env.BENCH_CSV_BOUND_MB ?? 64);
/** The capped heap (--max-old-space-size) the exports must finish in: about twice what the idle web process uses. */
const HEAP_CAP_MB = Number(process.env.BENCH_CSV_HEAP_CAP_MB ?? 128);
/** The slow reader: a pause of SLOW_PAUSE_MS after every SLOW_EVERY rows. */
const SLOW_EVERY = 250;
const SLOW_PAUSE_MS = 5;
const SAMPLE_MS = 25;
const PORT = '3904';
const env: Record<string, string> = {
  ...(process.env as Record<string, string>),
  DATABASE_URL: process.env.BENCH_CSV_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/rampway_bench_csv',
  REDIS_PREFIX: `rampway-csv-${Date.now().toString(36)}`,
  LOG_LEVEL: 'info',
  RATE_LIMIT_DEFAULT: '100000000',
  SANDBOX_STEP_MS: '0',
};
const api = `http://127.0.0.1:${PORT}/api/v1/business`;

const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const round1 = (x: number) => Number(x.toFixed(1));

await ensureDatabase(env.DATABASE_URL);
await ensureRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
Object.assign(process.env, env);
const { createDataSource, runMigrations } = await import('../shared/db/data-source.js');
const { postEntry } = await import('../shared/domain/ledger.js');
// Seeding writes 100,000 rows a statement: more than the service's statement timeout allows a request.
const ds = createDataSource({ poolSize: 2, statementTimeoutMs: 600_000 });
await ds.initialize();
await runMigrations(ds);

type Em = { query: (sql: string, params?: unknown[]) => Promise<any> };

/**
 * `INSERT INTO table SELECT ... FROM clones c JOIN table src ON src.<column> = template` over every column the table has
 * (read from the catalogue, so a column added later is copied too), with `overrides` for the columns that must differ.
 */
async function cloneInto(em: Em, clones: string, table: string, template: string, overrides: Record<string, string>, column = 'id'): Promise<void> {
  const columns: { column_name: string }[] = await em.query(
    `SELECT column_name FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name = $1 AND is_generated = 'NEVER' AND identity_generation IS NULL AND column_default IS DISTINCT FROM 'pg_current_xact_id()'
        AND NOT (coalesce(column_default, '') LIKE 'nextval(%' AND column_name = 'id')
      ORDER BY ordinal_position`,
    [table],
  );
  const names = columns.map((c) => c.column_name);
  await em.query(
    `INSERT INTO ${table} (${names.join(', ')}) SELECT ${names.map((c) => overrides[c] ?? `src.${c}`).join(', ')} FROM ${clones} c JOIN ${table} src ON src.${column} = $1`,
    [template],
  );
}

/** A temporary table of `count` clone numbers, each with fresh ids, hash and address (this run's own) and an age (clone n is n seconds older). */
async function clonesTable(em: Em, name: string, count: number): Promise<void> {
  await em.query(`CREATE TEMP TABLE ${name} ON COMMIT DROP AS
    SELECT n, gen_random_uuid() AS id, gen_random_uuid() AS quote_id, gen_random_uuid() AS settlement_id, make_interval(secs => n) AS age,
           '0x' || $2 || lpad(to_hex(n), 56, '0') AS hash, '0x' || $2 || lpad(to_hex(n), 32, '0') AS address
      FROM generate_series(1, $1::int) n`, [count, randomBytes(4).toString('hex')]);
}

/** Clones the off-ramp `template` (its quote, settlement and the settlement's transfer) until the business has ROWS. */
async function seedTransactions(businessId: string, template: string): Promise<void> {
  const [{ n: have }] = await ds.query(`SELECT count(*)::int AS n FROM transactions WHERE business_id = $1 AND environment = 'sandbox'`, [businessId]);
  const [{ quote_id: quoteId }] = await ds.query(`SELECT quote_id FROM transactions WHERE id = $1`, [template]);
  const [settlement] = await ds.query(`SELECT id FROM settlements WHERE transaction_id = $1`, [template]);
  const started = performance.now();
  await ds.transaction(async (em) => {
    await clonesTable(em, 'bench_clones', ROWS - have);
    const aged = { created_at: 'src.created_at - c.age', updated_at: 'src.updated_at - c.age' };
    await cloneInto(em, 'bench_clones', 'quotes', quoteId, { ...aged, id: 'c.quote_id', expires_at: 'src.expires_at - c.age' });
    await cloneInto(em, 'bench_clones', 'transactions', template, {
      ...aged, id: 'c.id', quote_id: 'c.quote_id', external_reference: `'csv-bench-' || c.n`, completed_at: 'src.completed_at - c.age',
    });
    if (settlement) {
      await cloneInto(em, 'bench_clones', 'settlements', settlement.id, { ...aged, id: 'c.settlement_id', transaction_id: 'c.id', to_address: 'c.address', transaction_hash: 'c.hash' });
      await cloneInto(em, 'bench_clones', 'settlement_transfers', settlement.id, { settlement_id: 'c.settlement_id', transaction_hash: 'c.hash' }, 'settlement_id');
    }
  });
  await ds.query('ANALYZE transactions');
  await ds.query('ANALYZE settlements');
  process.stderr.write(`seeded ${(ROWS - have).toLocaleString('en')} transactions in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}

/** About LEDGER_ENTRIES journal entries of two postings (treasury funding, as a test funds it, and its reverse, in turn), in one transaction as the ledger requires. */
async function seedLedger(businessId: string): Promise<void> {
  const started = performance.now();
  await ds.transaction(async (em) => {
    const entry = await postEntry(em, { businessId, environment: 'sandbox' }, {
      kind: 'bench_transfer', reference: `csv-bench-${Date.now()}`,
      postings: [{ account: { kind: 'inbound_clearing', asset: 'USDC' }, amount: -10_000n }, { account: { kind: 'treasury', asset: 'USDC' }, amount: 10_000n }],
    });
    // An even number of copies, every other one the template reversed: together they move no balance.
    const copies = Math.floor((LEDGER_ENTRIES - 1) / 2) * 2;
    await clonesTable(em, 'bench_entries', copies);
    // The ledger's row triggers (each posting applied to its balance, each entry checked balanced at commit) would cost
    // minutes for copies that net to zero; they go in without them (replica role), each entry balanced as it is copied.
    await em.query('SET LOCAL session_replication_role = replica');
    await cloneInto(em, 'bench_entries', 'journal_entries', entry.id, { id: 'c.id', reference: `src.reference || '-' || c.n`, created_at: 'src.created_at - c.age' });
    await cloneInto(em, 'bench_entries', 'ledger_postings', entry.id, {
      entry_id: 'c.id', created_at: 'src.created_at - c.age', amount: 'CASE WHEN c.n % 2 = 0 THEN src.amount ELSE -src.amount END',
    }, 'entry_id');
    await em.query('SET LOCAL session_replication_role = origin');
  });
  await ds.query('ANALYZE journal_entries');
  await ds.query('ANALYZE ledger_postings');
  process.stderr.write(`seeded ${LEDGER_ENTRIES.toLocaleString('en')} journal entries in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}

interface Measured {
  rows: number;
  seconds: number;
  rows_per_s: number;
  rss_before_mb: number;
  rss_peak_mb: number;
  rss_after_mb: number;
  peak_growth_mb: number;
  flat: boolean;
}

/**
 * One export read to its end through a CSV parser (RFC 4180, so a quoted comma or line break counts right), the web
 * process's VmRSS sampled every SAMPLE_MS meanwhile; `slow` pauses after every SLOW_EVERY rows.
 */
async function measureExport(pid: number, key: string, path: string, slow: boolean): Promise<Measured> {
  await sleep(2000); // the previous work's garbage collected, as far as an idle process does
  const before = rssMb(pid);
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssMb(pid));
  }, SAMPLE_MS);
  const started = performance.now();
  let rows = 0;
  try {
    const res = await fetch(`${api}${path}`, { headers: { Authorization: `Bearer ${key}`, Accept: 'text/csv' } });
    if (res.status !== 200 || !res.headers.get('content-type')?.startsWith('text/csv')) throw new Error(`${path}: ${res.status} ${res.headers.get('content-type')} ${await res.text()}`);
    for await (const _record of Readable.fromWeb(res.body as WebReadableStream).pipe(parse({ from_line: 2 }))) {
      rows += 1;
      if (slow && rows % SLOW_EVERY === 0) await sleep(SLOW_PAUSE_MS);
    }
  } finally {
    clearInterval(sampler);
  }
  const seconds = (performance.now() - started) / 1000;
  peak = Math.max(peak, rssMb(pid));
  await sleep(2000);
  const after = rssMb(pid);
  const growth = peak - before;
  return {
    rows, seconds: Number(seconds.toFixed(2)), rows_per_s: Math.round(rows / seconds), rss_before_mb: round1(before), rss_peak_mb: round1(peak), rss_after_mb: round1(after),
    peak_growth_mb: round1(growth), flat: growth <= BOUND_MB,
  };
}

/** The web process's heap settings an export is measured under: as the Procfile runs it, then with its heap capped. */
const HEAPS = [
  { name: 'default heap', nodeOptions: '' },
  // An export that held its rows could not finish here; V8 left to itself grows the old generation before collecting it.
  { name: `heap capped at ${HEAP_CAP_MB} MB`, nodeOptions: `--max-old-space-size=${HEAP_CAP_MB}` },
];

const started: Started[] = [];
try {
  // The worker pools only while the template off-ramp is made through the API; the exports meet the web process alone.
  const seeder = await startProcess('api/main.ts', { ...env, PORT }, 'web listening');
  started.push(seeder);
  const workers = await startProcess('workers/main.ts', env, 'workers started');
  started.push(workers);
  const seed = await seedBench(api);
  await stopProcess(workers);
  await stopProcess(seeder);
  const [{ business_id: businessId }] = await ds.query('SELECT business_id FROM transactions WHERE id = $1', [seed.transactionId]);
  await seedTransactions(businessId, seed.transactionId);
  if (LEDGER_ENTRIES > 0) await seedLedger(businessId);

  const load = loadavg()[0];
  const runs: { name: string; path: string; slow: boolean }[] = [
    { name: 'GET /transactions, read at full speed', path: '/transactions', slow: false },
    { name: `GET /transactions, read slowly (${SLOW_PAUSE_MS} ms pause every ${SLOW_EVERY} rows)`, path: '/transactions', slow: true },
    ...(LEDGER_ENTRIES > 0 ? [{ name: 'GET /treasury/ledger, read at full speed', path: '/treasury/ledger', slow: false }] : []),
  ];
  const measured: (Measured & { name: string; heap: string })[] = [];
  for (const heap of HEAPS) {
    const web = await startProcess('api/main.ts', { ...env, PORT, NODE_OPTIONS: heap.nodeOptions }, 'web listening');
    started.push(web);
    // Warm-up: the export's code paths compiled and the pool's connections open before anything counts.
    await measureExport(web.child.pid!, seed.key, '/transactions?created_gte=2999-01-01T00:00:00Z', false);
    for (const run of runs) {
      measured.push({ heap: heap.name, name: run.name, ...(await measureExport(web.child.pid!, seed.key, run.path, run.slow)) });
      process.stderr.write(`${heap.name}, ${run.name}: done\n`);
    }
    await stopProcess(web);
  }
  // Flat: with the heap capped every export finishes whole, its resident memory within BOUND_MB of the idle process's.
  const capped = measured.filter((m) => m.heap !== HEAPS[0].name);
  const flat = capped.every((m) => m.flat && m.rows === ROWS);
  process.stdout.write([
    `CSV exports (Accept: text/csv) of ${ROWS.toLocaleString('en')} rows from the web process (1-minute load average ${load.toFixed(2)} when they started)`,
    `| web process | export | rows | s | rows/s | RSS before MB | peak MB | after MB | peak growth MB | within ${BOUND_MB} MB |`,
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---|',
    ...measured.map((m) => `| ${m.heap} | ${m.name} | ${m.rows} | ${m.seconds} | ${m.rows_per_s} | ${m.rss_before_mb} | ${m.rss_peak_mb} | ${m.rss_after_mb} | ${m.peak_growth_mb} | ${m.flat ? 'yes' : 'no'} |`),
    `flat memory (every export whole with the heap capped at ${HEAP_CAP_MB} MB, RSS growth within ${BOUND_MB} MB): ${flat ? 'yes' : 'no'}`,
    '',
  ].join('\n'));
  const resultsFile = join(import.meta.dirname, 'results.json');
  const results = existsSync(resultsFile) ? JSON.parse(readFileSync(resultsFile, 'utf8')) : {};
  results.csv_export = {
    measured_at: new Date().toISOString(), load_average_1m: Number(load.toFixed(2)), rows: ROWS, bound_mb: BOUND_MB, heap_cap_mb: HEAP_CAP_MB, sample_ms: SAMPLE_MS, flat, exports: measured,
  };
  writeFileSync(resultsFile, `${JSON.stringify(results, null, 2)}\n`);
  process.exitCode = flat ? 0 : 1;
} finally {
  for (const child of started.reverse()) await stopProcess(child);
  await ds.destroy();
}
