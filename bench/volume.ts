// A realistic database for the benchmarks (issue 39): another tenant's million transactions and hundred thousand
// customers (each with a funded managed wallet and its ledger account) in the same tables as the benchmark's business.
//
// How: the service (web and worker pools of this checkout, on a port and Redis prefix of its own) runs once against the
// database, and a business of its own ("Volume Co") makes through the API, first a warm-up round (so its business-wide
// ledger accounts exist), then one template of each: a customer with its managed wallet funded from the sandbox faucet,
// an off-ramp completed, an off-ramp failed (payout rejected), an on-ramp completed and an on-ramp failed (collection
// declined). Every row a template made (found by primary key, before and after) is then cloned in SQL, in batches, from
// generate_series: uuids the template made are derived anew per copy (md5 of the old id and the copy), so references
// between the copied rows follow, and ids inside text and JSON (references, payloads, keys) are rewritten the same way;
// a transaction's copy belongs to one of the copied customers (its wallet, its wallet's ledger account); other unique
// values get a suffix or, for 0x hex values (addresses, hashes), a derived value of the same length; hd_index takes the
// service's own sequence; every timestamp of a copy moves back by the same amount, up to 180 days, so time-ordered
// indexes and cursors see a spread. Only terminal states are copied: a copy left processing or action_required would be
// picked up by the benchmark's own workers and sweepers, which would measure them instead of the request path.
//
// The ledger: the posting triggers (stored balance per posting, entry balanced at commit) are switched off for the
// copy, inside the one database transaction that does it all (so a failure leaves them on and nothing copied); the
// stored balances and stripes of the business's accounts are then set from their postings, and before commit every
// copied entry is checked to balance per asset with at least two postings (findLedgerInconsistencies's rule), and
// every account of the business to hold what its postings say. Foreign keys stay on: the database checks each copy.
//
// Idempotent: a database that already holds a "Volume Co" with at least the transactions asked for is left as it is
// (the answer says so); otherwise a new Volume Co is made and filled (a run cut short leaves an extra, smaller tenant).
//
// As a script: BENCH_DATABASE_URL (default rampway_bench), VOLUME_TRANSACTIONS (1000000), VOLUME_CUSTOMERS (100000).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { ensureDatabase } from '../scripts/preflight.js';
import { freePort, startProcess, stopProcess, type Started } from '../test/helpers/processes.js';
import { apiCaller } from './seed.js';

export const VOLUME_BUSINESS = 'Volume Co';
/**
 * Rows the fill leaves alone: derived or process state (address pool, rates, cursors), recomputed stripes, the tenants,
 * and what the service keeps for a day only: idempotency records (the purge, IDEMPOTENCY_TTL_SECONDS) and dispatched
 * outbox rows (the outbox cleanup, 24 hours). Copies of those spread over months would be deleted, millions at a time,
 * while a measurement runs (a first million-row run spent most of its PostgreSQL time on that backlog).
 */
const NOT_COPIED = new Set(['hd_address_pool', 'exchange_rates', 'chain_cursors', 'ledger_balance_stripes', 'schema_migrations', 'businesses', 'api_keys', 'idempotency_records', 'outbox_jobs']);
/** Triggers off while copying: per-row balance updates and per-entry checks, redone in bulk below. */
const LEDGER_TRIGGERS: [string, string][] = [
  ['ledger_postings', 'ledger_postings_same_transaction'], ['ledger_postings', 'ledger_postings_apply'], ['ledger_postings', 'ledger_postings_balanced'],
  ['journal_entries', 'journal_entries_balanced'], ['ledger_accounts', 'ledger_accounts_guard'], ['ledger_balance_stripes', 'ledger_balance_stripes_guard'],
];
/** Copies per statement. */
const BATCH = 25_000;
const SPREAD_SECONDS = 180 * 86_400;

interface Column { name: string; type: string; generated: boolean; unique: boolean }
/** `uniques`: the columns of each unique index (those an index expression names included); `refers`: the tables its foreign keys name. */
interface Table { name: string; pk: string[]; columns: Column[]; uniques: string[][]; refers: string[] }
/** The rows one template made: per table, their primary keys as text. */
type Bundle = Map<string, string[]>;
interface Template { tag: string; share: number; bundle: Bundle }

export interface VolumeOptions { transactions?: number; customers?: number; log?: (line: string) => void }
export interface VolumeResult { business_id: string; customers: number; transactions: number; seconds: number; already?: boolean }

export async function fillVolume(databaseUrl: string, options: VolumeOptions = {}): Promise<VolumeResult> {
  const transactions = options.transactions ?? 1_000_000;
  const customers = Math.max(1, options.customers ?? 100_000);
  const log = options.log ?? ((line: string) => console.log(line));
  const began = performance.now();
  await ensureDatabase(databaseUrl);
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    // The service's role timeout would cut the bulk statements short.
    // JIT compiles each copy statement for longer than it runs.
    await db.query(`SET statement_timeout = 0; SET jit = off`);
    await migrate(databaseUrl);
    const [filled] = (await db.query<{ id: string; customers: number; transactions: number }>(
      `SELECT b.id, (SELECT count(*)::int FROM customers c WHERE c.business_id = b.id) AS customers,
              (SELECT count(*)::int FROM transactions t WHERE t.business_id = b.id) AS transactions
         FROM businesses b WHERE b.name = $1 ORDER BY transactions DESC LIMIT 1`, [VOLUME_BUSINESS])).rows;
    if (filled && filled.transactions >= transactions) {
      log(`volume: already filled (${filled.transactions} transactions, ${filled.customers} customers of ${VOLUME_BUSINESS})`);
      return { business_id: filled.id, customers: filled.customers, transactions: filled.transactions, seconds: 0, already: true };
    }
    const tables = await describe(db);
    log('volume: making the templates through the API (web and worker pools of this checkout)');
    const made = await makeTemplates(db, databaseUrl, tables, log);
    log(`volume: templates made in ${((performance.now() - began) / 1000).toFixed(1)} s; copying ${customers} customers and ${transactions} transactions`);
    await db.query('BEGIN');
    for (const [table, trigger] of LEDGER_TRIGGERS) await db.query(`ALTER TABLE ${table} DISABLE TRIGGER ${trigger}`);
    await functions(db);
    await copy(db, tables, made.customer, customers, null, log);
    // Statistics that know the copied customers: the foreign-key checks' plans are made from them.
    for (const name of ['businesses', 'customers', 'wallets', 'ledger_accounts', 'journal_entries', 'beneficiaries']) await db.query(`ANALYZE ${name}`);
    for (const t of made.transactions) await copy(db, tables, t, Math.round(transactions * t.share), { bundle: made.customer.bundle, customers }, log);
    await settleLedger(db, made.businessId, log);
    for (const [table, trigger] of LEDGER_TRIGGERS) await db.query(`ALTER TABLE ${table} ENABLE TRIGGER ${trigger}`);
    await db.query('COMMIT');
    log('volume: committed; VACUUM ANALYZE');
    for (const t of tables.values()) if (!NOT_COPIED.has(t.name)) await db.query(`VACUUM ANALYZE ${t.name}`);
    const [counts] = (await db.query<{ customers: number; transactions: number }>(
      `SELECT (SELECT count(*)::int FROM customers WHERE business_id = $1) AS customers, (SELECT count(*)::int FROM transactions WHERE business_id = $1) AS transactions`, [made.businessId])).rows;
    const seconds = Math.round((performance.now() - began) / 100) / 10;
    log(`volume: ${counts.customers} customers, ${counts.transactions} transactions in ${seconds} s`);
    return { business_id: made.businessId, ...counts, seconds };
  } catch (err) {
    await db.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    await db.end();
  }
}

async function migrate(databaseUrl: string): Promise<void> {
  const { createDataSource, runMigrations } = await import('../shared/db/data-source.js');
  const ds = createDataSource({ url: databaseUrl, poolSize: 2 });
  await ds.initialize();
  try {
    await runMigrations(ds);
  } finally {
    await ds.destroy();
  }
}

/** Every table of the schema: its primary key, its columns, which are generated (identity or sequence) and which are unique (alone or with others). */
async function describe(db: pg.Client): Promise<Map<string, Table>> {
  const { rows } = await db.query<{ table: string; column: string; type: string; generated: boolean; pk: boolean; unique: boolean }>(`
    SELECT c.relname AS table, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type,
           (a.attidentity <> '' OR coalesce(pg_get_expr(d.adbin, d.adrelid), '') LIKE 'nextval(%') AS generated,
           EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary AND a.attnum = ANY(i.indkey)) AS pk,
           EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisunique
                      AND (a.attnum = ANY(i.indkey) OR pg_get_expr(i.indexprs, i.indrelid) LIKE '%' || a.attname || '%')) AS unique
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
      JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
     WHERE c.relkind = 'r' ORDER BY c.relname, a.attnum`);
  const tables = new Map<string, Table>();
  for (const r of rows) {
    const t = tables.get(r.table) ?? { name: r.table, pk: [], columns: [], uniques: [], refers: [] };
    tables.set(r.table, t);
    if (r.pk) t.pk.push(r.column);
    t.columns.push({ name: r.column, type: r.type, generated: r.generated, unique: r.unique });
  }
  const { rows: indexes } = await db.query<{ table: string; columns: string[] }>(`
    SELECT c.relname AS table, array_agg(a.attname::text) AS columns
      FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
      JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
           AND (a.attnum = ANY(i.indkey) OR pg_get_expr(i.indexprs, i.indrelid) LIKE '%' || a.attname || '%')
     WHERE i.indisunique GROUP BY c.relname, i.indexrelid`);
  for (const i of indexes) tables.get(i.table)?.uniques.push(i.columns);
  const { rows: keys } = await db.query<{ table: string; refers: string }>(
    `SELECT conrelid::regclass::text AS table, confrelid::regclass::text AS refers FROM pg_constraint WHERE contype = 'f' AND conrelid <> confrelid`);
  for (const k of keys) tables.get(k.table)?.refers.push(k.refers);
  return tables;
}

const keyOf = (t: Table) => `row(${t.pk.map((c) => `"${c}"`).join(', ')})::text`;

/** Every row's primary key, per copied table. */
async function snapshot(db: pg.Client, tables: Map<string, Table>): Promise<Map<string, Set<string>>> {
  const seen = new Map<string, Set<string>>();
  for (const t of tables.values()) {
    if (NOT_COPIED.has(t.name) || t.pk.length === 0) continue;
    seen.set(t.name, new Set((await db.query<{ k: string }>(`SELECT ${keyOf(t)} AS k FROM ${t.name}`)).rows.map((r) => r.k)));
  }
  return seen;
}

/** The rows `make` added, once the service is quiet (no outbox row pending, nothing new for a moment). */
async function captured(db: pg.Client, tables: Map<string, Table>, make: () => Promise<void>): Promise<Bundle> {
  const before = await snapshot(db, tables);
  await make();
  let last = -1;
  for (let tries = 0; ; tries++) {
    await new Promise((r) => setTimeout(r, 400));
    const [{ n, pending }] = (await db.query<{ n: number; pending: number }>(
      `SELECT (SELECT count(*)::int FROM events) + (SELECT count(*)::int FROM outbox_jobs) + (SELECT count(*)::int FROM status_history) AS n,
              (SELECT count(*)::int FROM outbox_jobs WHERE dispatched_at IS NULL) AS pending`)).rows;
    if ((n === last && pending === 0) || tries > 100) break;
    last = n;
  }
  const after = await snapshot(db, tables);
  const bundle: Bundle = new Map();
  for (const [name, keys] of after) {
    const added = [...keys].filter((k) => !before.get(name)!.has(k));
    if (added.length) bundle.set(name, added);
  }
  return bundle;
}

async function makeTemplates(db: pg.Client, databaseUrl: string, tables: Map<string, Table>, log: (line: string) => void) {
  const { createDataSource } = await import('../shared/db/data-source.js');
  const { createBusiness } = await import('../shared/admin/commands.js');
  const { getConfig } = await import('../shared/config.js');
  const ds = createDataSource({ url: databaseUrl, poolSize: 1 });
  await ds.initialize();
  const biz = await createBusiness({ ds, config: getConfig() }, { name: VOLUME_BUSINESS }).finally(() => ds.destroy());
  const port = await freePort();
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>), DATABASE_URL: databaseUrl, PORT: String(port), REDIS_PREFIX: `rampway-volume-${Date.now().toString(36)}`,
    LOG_LEVEL: 'info', RATE_LIMIT_DEFAULT: '100000000', SANDBOX_STEP_MS: '0',
  };
  const cwd = join(import.meta.dirname, '..');
  const started: Started[] = [];
  try {
    started.push(await startProcess('api/main.ts', env, 'web listening', [], { cwd }));
    started.push(await startProcess('workers/main.ts', env, 'workers started', [], { cwd }));
    const call = apiCaller(`http://127.0.0.1:${port}/api/v1/business`, biz.keys.find((k) => k.environment === 'sandbox')!.key);
    const beneficiary = async (phone: string) => (await call('POST', '/beneficiaries', {
      currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Volume Payee', details: { phone_number: phone, mobile_network: 'safaricom' },
    })).id as string;
    const paid = await beneficiary('+254722480163');
    const rejected = await beneficiary('+254722480002');
    const priced = async (body: object) => {
      let quote = await call('POST', '/quotes', { chain: 'base', currency: 'KES', payment_method: 'mobile_money', ...body });
      for (let tries = 0; quote.status === 'pending'; tries++) {
        if (tries > 300) throw new Error(`volume: quote ${quote.id} stayed pending`);
        await new Promise((r) => setTimeout(r, 100));
        quote = await call('GET', `/quotes/${quote.id}`);
      }
      return quote.id as string;
    };
    const settled = async (id: string, status: string) => {
      for (let tries = 0; ; tries++) {
        const tx = await call('GET', `/transactions/${id}`);
        if (tx.status === status) return;
        if (tries > 300 || ['completed', 'failed'].includes(tx.status)) throw new Error(`volume: ${id} is ${tx.status}, not ${status}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    let walletId = '';
    const customer = async () => {
      const made = await call('POST', '/customers', { external_reference: `volume-${Date.now().toString(36)}` });
      walletId = made.wallet.id;
      await call('POST', `/sandbox/wallets/${walletId}/fund`, { chain: 'base', amount: '10000' });
    };
    const offramp = (to: string, status: string) => async () => {
      const quote = await priced({ direction: 'offramp', source_amount: '25', beneficiary_id: to });
      await settled((await call('POST', '/offramps', { quote_id: quote, funding_source: { wallet_id: walletId } })).id, status);
    };
    const onramp = (phone: string, status: string) => async () => {
      const quote = await priced({ direction: 'onramp', destination_amount: '25', wallet_id: walletId });
      await settled((await call('POST', '/onramps', { quote_id: quote, payment_method: { type: 'mobile_money', phone_number: phone, mobile_network: 'safaricom' } })).id, status);
    };
    const kinds: [string, number, () => Promise<void>][] = [
      ['offramp-completed', 0.62, offramp(paid, 'completed')], ['onramp-completed', 0.3, onramp('+254722480163', 'completed')],
      ['offramp-failed', 0.05, offramp(rejected, 'failed')], ['onramp-failed', 0.03, onramp('+254722480001', 'failed')],
    ];
    // The warm-up: the business-wide accounts (faucet, clearing, fees) come into being here, not in a template.
    await customer();
    for (const [, , make] of kinds) await make();
    const made = { businessId: biz.business_id, customer: { tag: 'c', share: 0, bundle: await captured(db, tables, customer) }, transactions: [] as Template[] };
    for (const [tag, share, make] of kinds) made.transactions.push({ tag, share, bundle: await captured(db, tables, make) });
    for (const t of [made.customer, ...made.transactions]) log(`volume: template ${t.tag}: ${[...t.bundle].map(([name, keys]) => `${name} ${keys.length}`).join(', ')}`);
    return made;
  } finally {
    for (const child of started.reverse()) await stopProcess(child);
  }
}

/** The derivations, as SQL functions PostgreSQL inlines: a new uuid, and a new 0x hex value of the same length, per copy. */
async function functions(db: pg.Client): Promise<void> {
  await db.query(`CREATE FUNCTION pg_temp.vol_uuid(old text, tag text, n bigint) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$ SELECT md5(old || ':' || tag || ':' || n)::uuid $$`);
  await db.query(`CREATE FUNCTION pg_temp.vol_hex(old text, tag text, n bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT '0x' || left(md5(lower(old) || ':' || tag || ':' || n) || md5(lower(old) || ':' || tag || ':' || n || ':2'), length(old) - 2) $$`);
}

const HEX = /^0x[0-9a-fA-F]{40}([0-9a-fA-F]{24})?$/;
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/**
 * `count` copies of the template's rows, numbered 1..count. `owner`: the customer template whose copies the copied
 * transactions belong to (copy n to customer copy n % customers + 1).
 */
async function copy(db: pg.Client, tables: Map<string, Table>, template: Template, count: number, owner: { bundle: Bundle; customers: number } | null, log: (line: string) => void): Promise<void> {
  if (count <= 0) return;
  const began = performance.now();
  // The template's values: which ids it made (its own uuids), which unique hex values (addresses, hashes) it holds.
  const rowsOf = async (bundle: Bundle) => {
    const out = new Map<string, Record<string, unknown>[]>();
    for (const [name, keys] of bundle) out.set(name, (await db.query(`SELECT * FROM ${name} WHERE ${keyOf(tables.get(name)!)} = ANY($1)`, [keys])).rows);
    return out;
  };
  const madeIds = (rows: Map<string, Record<string, unknown>[]>) => {
    const ids = new Set<string>();
    const hexes = new Set<string>();
    for (const [name, list] of rows) {
      const t = tables.get(name)!;
      for (const row of list) for (const c of t.columns) {
        const v = row[c.name];
        if (c.type === 'uuid' && t.pk.includes(c.name) && typeof v === 'string') ids.add(v);
        if (c.unique && typeof v === 'string' && HEX.test(v)) hexes.add(v.toLowerCase());
      }
    }
    return { ids, hexes };
  };
  const rows = await rowsOf(template.bundle);
  const own = madeIds(rows);
  const theirs = owner ? madeIds(await rowsOf(owner.bundle)) : { ids: new Set<string>(), hexes: new Set<string>() };
  const tag = `'${template.tag}'`;
  const ownerN = owner ? `(g % ${owner.customers} + 1)` : 'g';
  // Spread over 180 days, the same shift for every timestamp of one copy (Knuth's multiplicative hash of its number).
  const shift = `make_interval(secs => ((g * 2654435761 + ${template.tag.length * 7919}) % ${SPREAD_SECONDS})::double precision)`;

  const rewrite = (expr: string, text: string): string => {
    let out = expr;
    for (const id of new Set(text.match(UUID) ?? [])) {
      if (own.ids.has(id)) out = `replace(${out}, '${id}', pg_temp.vol_uuid('${id}', ${tag}, g)::text)`;
      else if (theirs.ids.has(id)) out = `replace(${out}, '${id}', pg_temp.vol_uuid('${id}', 'c', ${ownerN})::text)`;
    }
    // Each spelling the template holds (lower case, checksummed) by plain replace: a case-blind regexp costs far more.
    for (const hex of [...own.hexes, ...theirs.hexes]) {
      const to = own.hexes.has(hex) ? `pg_temp.vol_hex('${hex}', ${tag}, g)` : `pg_temp.vol_hex('${hex}', 'c', ${ownerN})`;
      const spellings = new Set(text.match(new RegExp(hex, 'gi')) ?? []);
      for (const spelling of spellings) out = `replace(${out}, '${spelling}', ${to})`;
    }
    return out;
  };

  // Referenced tables first: foreign keys are checked row by row.
  const order: string[] = [];
  const seen = new Set<string>();
  const visit = (name: string) => {
    if (seen.has(name) || !rows.has(name)) return;
    seen.add(name);
    for (const r of tables.get(name)!.refers) visit(r);
    order.push(name);
  };
  for (const name of rows.keys()) visit(name);
  // The template's rows in a temporary table of their own: a few rows each copy reads, whatever plan is chosen.
  for (const name of order) {
    await db.query(`CREATE TEMPORARY TABLE "template_${template.tag}_${name}" ON COMMIT DROP AS SELECT * FROM ${name} WHERE ${keyOf(tables.get(name)!)} = ANY($1)`, [template.bundle.get(name)]);
  }
  const statements = order.map((name) => {
    const list = rows.get(name)!;
    const t = tables.get(name)!;
    const columns = t.columns.filter((c) => !c.generated);
    const exprs = columns.map((c) => {
      const col = `"${c.name}"`;
      const values = list.map((r) => r[c.name]).filter((v) => v !== null && v !== undefined);
      if (values.length === 0) return col;
      if (c.name === 'hd_index') return `nextval('hd_address_index')::integer`;
      if (c.type === 'uuid') {
        if (!values.some((v) => own.ids.has(String(v)) || theirs.ids.has(String(v)))) return col;
        return `CASE WHEN ${col} = ANY('{${[...own.ids].join(',')}}'::uuid[]) THEN pg_temp.vol_uuid(${col}::text, ${tag}, g)`
          + (theirs.ids.size ? ` WHEN ${col} = ANY('{${[...theirs.ids].join(',')}}'::uuid[]) THEN pg_temp.vol_uuid(${col}::text, 'c', ${ownerN})` : '')
          + ` ELSE ${col} END`;
      }
      if (c.type.startsWith('timestamp')) return `${col} - ${shift}`;
      const text = values.map((v) => (typeof v === 'object' && !(v instanceof Date) ? JSON.stringify(v) : String(v))).join('\n');
      const rewritten = rewrite(`${col}::text`, text);
      if (rewritten !== `${col}::text`) return `(${rewritten})::${c.type}`;
      return col;
    });
    // A unique index none of whose columns the copy changes would refuse the second copy: its most specific text
    // column (an external reference) takes the copy's number; a digest (an idempotency scope key), a digest of it and the number.
    for (const index of t.uniques) {
      if (index.some((name) => exprs[columns.findIndex((c) => c.name === name)] !== `"${name}"`)) continue;
      if (index.some((name) => list.every((r) => r[name] === null))) continue; // nulls are distinct
      const text = index.filter((name) => /^(text|character varying|bytea)/.test(columns.find((c) => c.name === name)?.type ?? '') && !['environment', 'chain', 'kind', 'asset', 'currency'].includes(name));
      if (!text.length) throw new Error(`volume: ${name}'s unique index (${index.join(', ')}) would refuse the copies`);
      const at = columns.findIndex((c) => c.name === text[text.length - 1]);
      exprs[at] = columns[at].type === 'bytea' ? `sha256(${exprs[at]} || convert_to(':${template.tag}:' || g, 'UTF8'))` : `${exprs[at]} || ':${template.tag}:' || g`;
    }
    // Unique non-text values the template holds (none expected beyond the above): the database refuses the copy.
    const sql = `INSERT INTO ${name} (${columns.map((c) => `"${c.name}"`).join(', ')})
      SELECT ${exprs.join(',\n ')} FROM "template_${template.tag}_${name}", generate_series($1::bigint, $2::bigint) AS g`;
    return { name, sql };
  });
  for (let from = 1; from <= count; from += BATCH) {
    const to = Math.min(count, from + BATCH - 1);
    for (const { name, sql } of statements) {
      const t0 = performance.now();
      await db.query(sql, [from, to]).catch((err: Error) => {
        throw new Error(`volume: copying ${name} (${template.tag}): ${err.message}\n${sql}`);
      });
      // VOLUME_TRACE=1: each statement's time, to see which table a slow fill spends it on.
      if (process.env.VOLUME_TRACE) log(`  ${name} ${(performance.now() - t0).toFixed(0)} ms`);
    }
    if (to < count) log(`volume: ${template.tag}: ${to} of ${count} copies, ${((performance.now() - began) / 1000).toFixed(1)} s`);
  }
  log(`volume: ${template.tag}: ${count} copies, ${[...rows.values()].reduce((n, l) => n + l.length, 0) * count} rows in ${((performance.now() - began) / 1000).toFixed(1)} s`);
}

/**
 * The business's stored balances from its postings (what the posting trigger would have summed), in stripe 0 for
 * striped accounts; then the checks the triggers would have made: every entry of the business balances per asset
 * with two postings or more, and no account of it holds anything but its postings' sum.
 */
async function settleLedger(db: pg.Client, businessId: string, log: (line: string) => void): Promise<void> {
  await db.query(`
    WITH sums AS (SELECT p.account_id, sum(p.amount) AS balance, count(*) AS version FROM ledger_postings p
                    JOIN ledger_accounts a ON a.id = p.account_id AND a.business_id = $1 GROUP BY p.account_id)
    UPDATE ledger_accounts a SET balance = s.balance, version = s.version FROM sums s WHERE a.id = s.account_id AND NOT a.striped`, [businessId]);
  await db.query(`DELETE FROM ledger_balance_stripes s USING ledger_accounts a WHERE a.id = s.account_id AND a.business_id = $1`, [businessId]);
  await db.query(`
    INSERT INTO ledger_balance_stripes (account_id, stripe, balance, version)
    SELECT p.account_id, 0, sum(p.amount), count(*) FROM ledger_postings p
      JOIN ledger_accounts a ON a.id = p.account_id AND a.business_id = $1 AND a.striped GROUP BY p.account_id`, [businessId]);
  const [{ unbalanced }] = (await db.query<{ unbalanced: number }>(`
    SELECT count(*)::int AS unbalanced FROM (
      SELECT e.id FROM journal_entries e LEFT JOIN ledger_postings p ON p.entry_id = e.id WHERE e.business_id = $1
       GROUP BY e.id HAVING count(p.id) < 2 OR EXISTS (
         SELECT 1 FROM ledger_postings q WHERE q.entry_id = e.id GROUP BY q.asset HAVING sum(q.amount) <> 0)) x`, [businessId])).rows;
  const [{ drifted, negative }] = (await db.query<{ drifted: number; negative: number }>(`
    WITH stored AS (
      SELECT a.id, CASE WHEN a.striped THEN coalesce(st.balance, 0) ELSE a.balance END AS balance, a.kind
        FROM ledger_accounts a LEFT JOIN (SELECT account_id, sum(balance) AS balance FROM ledger_balance_stripes GROUP BY account_id) st ON st.account_id = a.id
       WHERE a.business_id = $1)
    SELECT count(*) FILTER (WHERE s.balance <> coalesce(p.total, 0))::int AS drifted,
           count(*) FILTER (WHERE s.balance < 0 AND s.kind = 'wallet')::int AS negative
      FROM stored s LEFT JOIN (SELECT account_id, sum(amount) AS total FROM ledger_postings GROUP BY account_id) p ON p.account_id = s.id`, [businessId])).rows;
  if (unbalanced || drifted || negative) throw new Error(`volume: the copied ledger is unsound (${unbalanced} unbalanced entries, ${drifted} drifted accounts, ${negative} overdrawn wallets)`);
  log('volume: ledger balanced per entry; stored balances equal their postings');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const databaseUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/rampway_bench';
  process.env.DATABASE_URL = databaseUrl;
  const result = await fillVolume(databaseUrl, {
    transactions: Number(process.env.VOLUME_TRANSACTIONS ?? 1_000_000),
    customers: Number(process.env.VOLUME_CUSTOMERS ?? 100_000),
  });
  console.log(JSON.stringify(result));
}
