import { expect } from 'chai';
import { databaseConfig } from '../../shared/config-database.js';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { DataSource, type DataSourceOptions, type MigrationInterface, type QueryRunner } from 'typeorm';
import { loadConfig, resetConfig } from '../../shared/config.js';
import { createDataSource, runMigrations, setRoleStatementTimeout } from '../../shared/db/data-source.js';
import { planOnce, PreparingClient } from '../../shared/db/prepared-client.js';
import { databasePoolSizes, formationConnections } from '../../shared/db/pool-sizes.js';
import { testDatabaseUrl } from '../env.js';
import { makeBusiness } from '../helpers/factories.js';
import { pgbouncerInstalled, startPgbouncer, type Bouncer } from '../helpers/pgbouncer.js';
import { getDs } from '../helpers/shared.js';
import { until } from '../helpers/until.js';
import { expectEachPaidOnce, startOfframps, startService, untilEnded } from '../chaos/service.js';

const code = (err: unknown): string | undefined => err == null ? undefined : ((err as { driverError?: { code?: string }; code?: string }).driverError?.code ?? (err as { code?: string }).code);

describe('configuration: the pooled URL, the direct one, prepared statements, pool sizes', () => {
  const base = { DATABASE_URL: 'postgres://u@direct:5432/app' };
  it("Heroku's naming: DATABASE_CONNECTION_POOL_URL for running processes, DATABASE_URL direct", () => {
    const c = loadConfig({ ...base, DATABASE_CONNECTION_POOL_URL: 'postgres://u@pooler:6432/app?sslmode=require' });
    expect(c.databaseUrl).to.equal('postgres://u@direct:5432/app');
    expect(c.databasePoolUrl).to.equal('postgres://u@pooler:6432/app');
    expect(c.databasePoolSsl).to.deep.equal({ rejectUnauthorized: false });
    expect(c.databaseSsl).to.equal(false);
  });
  it('production reaches a database host of its own over TLS with no sslmode in the URL (Heroku Postgres hands out none); this machine stays plain; sslmode=disable opts out', () => {
    const heroku = { NODE_ENV: 'production', DATABASE_URL: 'postgres://u:p@ec2-1-2-3-4.compute-1.amazonaws.com:5432/d8a', DATABASE_CONNECTION_POOL_URL: 'postgres://u:p@ec2-1-2-3-4.compute-1.amazonaws.com:5433/d8a' };
    const c = databaseConfig(heroku);
    expect([c.databaseSsl, c.databasePoolSsl]).to.deep.equal([{ rejectUnauthorized: false }, { rejectUnauthorized: false }]);
    expect(databaseConfig({ ...heroku, DATABASE_SSL_REJECT_UNAUTHORIZED: 'true' }).databaseSsl).to.deep.equal({ rejectUnauthorized: true });
    expect(databaseConfig({ NODE_ENV: 'production', DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/rampway' }).databaseSsl).to.equal(false);
    expect(databaseConfig({ NODE_ENV: 'production', DATABASE_URL: 'postgres://postgres@localhost/rampway' }).databaseSsl).to.equal(false);
    expect(databaseConfig({ NODE_ENV: 'production', DATABASE_URL: `${heroku.DATABASE_URL}?sslmode=disable` }).databaseSsl).to.equal(false);
    expect(databaseConfig({ DATABASE_URL: heroku.DATABASE_URL }).databaseSsl, 'development: as the URL says').to.equal(false);
  });
  it('the other hosts\' naming: a pooled DATABASE_URL and its unpooled twin in DATABASE_DIRECT_URL', () => {
    const c = loadConfig({ DATABASE_URL: 'postgres://u@pooler:6432/app', DATABASE_DIRECT_URL: 'postgres://u@direct:5432/app' });
    expect(c.databaseUrl).to.equal('postgres://u@direct:5432/app');
    expect(c.databasePoolUrl).to.equal('postgres://u@pooler:6432/app');
    expect(loadConfig(base).databasePoolUrl).to.equal(null);
  });
  it('DATABASE_PREPARE is on, off or unset (each connection decides), DATABASE_STATEMENT_TIMEOUT_MS and DATABASE_POOL_SIZE are checked', () => {
    expect(loadConfig(base).databasePrepare).to.equal(null);
    expect(loadConfig({ ...base, DATABASE_PREPARE: 'on' }).databasePrepare).to.equal(true);
    expect(loadConfig({ ...base, DATABASE_PREPARE: 'off' }).databasePrepare).to.equal(false);
    expect(() => loadConfig({ ...base, DATABASE_PREPARE: 'yes' })).to.throw(/DATABASE_PREPARE must be on or off/);
    expect(loadConfig(base).databaseStatementTimeoutMs).to.equal(30_000);
    expect(() => loadConfig({ ...base, DATABASE_STATEMENT_TIMEOUT_MS: '30s' })).to.throw(/DATABASE_STATEMENT_TIMEOUT_MS must be an integer >= 0/);
    expect(() => loadConfig({ ...base, DATABASE_POOL_SIZE: '0' })).to.throw(/DATABASE_POOL_SIZE must be an integer >= 1/);
  });
  it('running processes (service: true) connect to the pooled URL with prepared statements off; migrations and admin commands to the direct one with them on; DATABASE_PREPARE forces either', () => {
    const keys = ['DATABASE_URL', 'DATABASE_CONNECTION_POOL_URL', 'DATABASE_DIRECT_URL', 'DATABASE_PREPARE'] as const;
    const saved = Object.fromEntries(keys.map((k) => [k, process.env[k]]));
    const as = (env: Partial<Record<(typeof keys)[number], string>>) => {
      for (const k of keys) delete process.env[k];
      Object.assign(process.env, env);
      resetConfig();
      // As api/deps.ts and workers/main.ts make theirs, and as scripts/migrate.ts, start.ts and admin.ts make theirs.
      const made = { service: createDataSource({ service: true }), direct: createDataSource({ poolSize: 2, statementTimeoutMs: 0 }) };
      const of = (ds: DataSource) => [(ds.options as { url: string }).url, (ds.options.extra as { Client: typeof pg.Client }).Client.prototype instanceof PreparingClient];
      return { service: of(made.service), direct: of(made.direct) };
    };
    const [direct, pooler] = ['postgres://u@direct:5432/app', 'postgres://u@pooler:6432/app'];
    try {
      expect(as({ DATABASE_URL: direct, DATABASE_CONNECTION_POOL_URL: pooler })).to.deep.equal({ service: [pooler, false], direct: [direct, true] });
      expect(as({ DATABASE_URL: pooler, DATABASE_DIRECT_URL: direct })).to.deep.equal({ service: [pooler, false], direct: [direct, true] });
      expect(as({ DATABASE_URL: direct })).to.deep.equal({ service: [direct, true], direct: [direct, true] });
      expect(as({ DATABASE_URL: direct, DATABASE_CONNECTION_POOL_URL: pooler, DATABASE_PREPARE: 'on' })).to.deep.equal({ service: [pooler, true], direct: [direct, true] });
      expect(as({ DATABASE_URL: direct, DATABASE_CONNECTION_POOL_URL: pooler, DATABASE_PREPARE: 'off' })).to.deep.equal({ service: [pooler, false], direct: [direct, false] });
    } finally {
      for (const k of keys) {
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
      }
      resetConfig();
    }
  });
  it("each process's pool, and a formation of 2 web and 2 of each pool within PgBouncer's default 100 clients", () => {
    expect(databasePoolSizes({ databasePoolSize: null })).to.deep.equal({ web: 10, worker: 10, pricing: 5, settlement: 5, providers: 5, sandbox: 5, webhooks: 5 });
    const formation = { web: 2, pricing: 2, settlement: 2, providers: 2, sandbox: 2, webhooks: 2 };
    expect(formationConnections(formation, { databasePoolSize: null }).total).to.equal(70);
    expect(formationConnections(formation, { databasePoolSize: 4 }).total).to.equal(48);
  });
});

/** Every .ts file under the service's own folders (not tests, benches or clients). */
function serviceSources(): { file: string; text: string }[] {
  const root = path.join(import.meta.dirname, '..', '..');
  const walk = (dir: string): string[] => readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : []);
  return ['api', 'shared', 'workers', 'scripts', 'migrations'].flatMap((d) => walk(path.join(root, d))).map((file) => ({ file, text: readFileSync(file, 'utf8') }));
}

describe('nothing a transaction-mode pooler loses', () => {
  it('no session advisory lock, no LISTEN, no session SET or set_config, no temporary table or held cursor in what the service runs', () => {
    const found: string[] = [];
    const rules: [string, RegExp][] = [
      ['session advisory lock', /pg_(try_)?advisory_lock(_shared)?\s*\(/],
      ['LISTEN', /[`'"]\s*(LISTEN|UNLISTEN)\s/i],
      ['session SET', /[`'"]\s*SET\s+(?!LOCAL\b|TRANSACTION\b|CONSTRAINTS\b)[a-z_.]+\s*(=|TO\b)/i],
      ['session set_config', /set_config\([^)]*,\s*false\s*\)/i],
      // A temporary table or a held cursor outlives its transaction on the server connection, not in the client's session.
      ['temporary table', /CREATE\s+(TEMP|TEMPORARY)\s+TABLE/i],
      ['cursor WITH HOLD', /\bWITH\s+HOLD\b/i],
    ];
    for (const { file, text } of serviceSources()) {
      for (const [what, re] of rules) if (re.test(text)) found.push(`${what}: ${path.relative(process.cwd(), file)}`);
    }
    expect(found).to.deep.equal([]);
  });
});

const describeIfBouncer = pgbouncerInstalled() ? describe : describe.skip;

describeIfBouncer('through PgBouncer in transaction mode, its defaults', function () {
  this.timeout(180_000);
  let bouncer: Bouncer;
  const role = `rw_timeout_${process.pid}`;
  const database = decodeURIComponent(new URL(testDatabaseUrl()).pathname.slice(1));
  const opened: DataSource[] = [];
  const open = async (options: Parameters<typeof createDataSource>[0]) => {
    const ds = createDataSource(options);
    opened.push(ds);
    return ds.initialize();
  };
  const pooled = (more: Parameters<typeof createDataSource>[0] = {}) => open({ url: bouncer.url, throughPooler: true, poolSize: 2, ...more });

  before(async () => {
    const ds = await getDs();
    await ds.query(`DROP ROLE IF EXISTS ${role}`);
    await ds.query(`CREATE ROLE ${role} LOGIN`);
    bouncer = await startPgbouncer(testDatabaseUrl(), [`${database}:${role}`]);
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((ds) => ds.isInitialized && ds.destroy()));
  });
  after(async () => {
    await bouncer?.stop();
    const ds = await getDs();
    await ds.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, [role]);
    await ds.query(`DROP ROLE IF EXISTS ${role}`);
  });

  it('connects with nothing PgBouncer refuses: no startup parameter beyond those it tracks', async () => {
    const ds = await pooled();
    expect(await ds.query('SELECT 1 AS one')).to.deep.equal([{ one: 1 }]);
    expect(bouncer.log()).not.to.match(/unsupported startup parameter/);
  });

  it('a statement running past the statement timeout is cancelled inside a transaction, through the pooler and directly', async () => {
    for (const ds of [await pooled({ statementTimeoutMs: 300 }), await open({ statementTimeoutMs: 300, poolSize: 1 })]) {
      const started = Date.now();
      const err = await ds.transaction((em) => em.query('SELECT pg_sleep(3)')).then(() => null, (e: unknown) => e);
      expect(code(err), String(err)).to.equal('57014'); // query_canceled: statement timeout
      expect(Date.now() - started).to.be.below(2_500);
      // SET LOCAL: the limit ended with its transaction, the server connection keeps none of it.
      expect(await ds.query('SHOW statement_timeout')).to.deep.equal([{ statement_timeout: '30s' }]);
    }
  });

  it('DATABASE_STATEMENT_TIMEOUT_MS as the processes read it: a transaction\'s statement past it is cancelled through DATABASE_CONNECTION_POOL_URL and through DATABASE_URL', async () => {
    const keys = ['DATABASE_STATEMENT_TIMEOUT_MS', 'DATABASE_CONNECTION_POOL_URL'] as const;
    const saved = Object.fromEntries(keys.map((k) => [k, process.env[k]]));
    process.env.DATABASE_STATEMENT_TIMEOUT_MS = '300';
    process.env.DATABASE_CONNECTION_POOL_URL = bouncer.url;
    resetConfig();
    try {
      // As web and the workers make theirs (service: the pooled URL), and as the admin commands make theirs (direct).
      const service = await open({ service: true, poolSize: 1 });
      const direct = await open({ poolSize: 1 });
      expect((service.options as { url: string }).url).to.equal(bouncer.url);
      for (const ds of [service, direct]) {
        const started = Date.now();
        const err = await ds.transaction((em) => em.query('SELECT pg_sleep(3)')).then(() => null, (e: unknown) => e);
        expect(code(err), String(err)).to.equal('57014');
        expect(Date.now() - started).to.be.below(2_500);
      }
    } finally {
      for (const k of keys) {
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
      }
      resetConfig();
    }
  });

  it('outside a transaction the role\'s default holds (the release phase sets it), through the pooler and directly', async () => {
    // The migrations of this run set the service role's default: a new session shows it.
    const direct = new pg.Client({ connectionString: testDatabaseUrl() });
    await direct.connect();
    expect((await direct.query('SHOW statement_timeout')).rows[0].statement_timeout).to.equal('30s');
    await direct.end();
    // A role of its own, given a short default the way the release phase does it.
    const url = new URL(testDatabaseUrl());
    url.username = role;
    const asRole = new pg.Client({ connectionString: url.toString() });
    await asRole.connect();
    await setRoleStatementTimeout(asRole, 300);
    await asRole.end();
    for (const connectionString of [bouncer.urlOf(database, role), url.toString()]) {
      const client = new pg.Client({ connectionString });
      await client.connect();
      try {
        const err = await client.query('SELECT pg_sleep(3)').then(() => null, (e: unknown) => e);
        expect(code(err), `${connectionString}: ${String(err)}`).to.equal('57014');
      } finally {
        await client.end();
      }
    }
  });

  it('named prepared statements are off through the pooled URL by default; DATABASE_PREPARE=on shows why', async () => {
    const text = planOnce(`SELECT $1::int + 1 AS n, 'pooler-prepare-${randomUUID()}' AS tag`);
    const a = await pooled({ poolSize: 1 });
    const b = await pooled({ poolSize: 1 });
    for (let i = 0; i < 5; i++) {
      expect((await a.query(text, [i]))[0].n).to.equal(i + 1);
      expect((await b.query(text, [i]))[0].n).to.equal(i + 1);
    }
    process.env.DATABASE_PREPARE = 'on';
    resetConfig();
    try {
      const c = await pooled({ poolSize: 1 });
      const d = await pooled({ poolSize: 1 });
      const forced = planOnce(`SELECT $1::int AS n, 'pooler-forced-${randomUUID()}' AS tag`);
      // c prepares it on the server connection PgBouncer lends it; d is lent the same one (idle, most recently used)
      // and prepares it again there, or is lent another that lacks it.
      const errors: string[] = [];
      for (let i = 0; i < 5; i++) {
        for (const ds of [c, d]) await ds.query(forced, [i]).catch((e: unknown) => errors.push(code(e) ?? String(e)));
      }
      expect(errors.length, 'a named statement met another client on one server connection').to.be.greaterThan(0);
      expect(errors.every((e) => e === '42P05' || e === '26000'), errors.join()).to.equal(true);
    } finally {
      delete process.env.DATABASE_PREPARE;
      resetConfig();
    }
  });

  it('two releases migrating through the pooler at once: one applies, the other waits and finds nothing to do, no lock left held', async () => {
    const table = `pooler_migrations_${process.pid}_${Date.now()}`;
    const probe = `${table}_runs`;
    const ds = await getDs();
    await ds.query(`CREATE TABLE ${probe} (runner text, at timestamptz DEFAULT clock_timestamp())`);
    try {
      class SlowProbe1764500400001 implements MigrationInterface {
        name = 'SlowProbe1764500400001';
        async up(q: QueryRunner): Promise<void> {
          await q.query(`INSERT INTO ${probe} (runner) VALUES (current_setting('application_name'))`);
          await q.query('SELECT pg_sleep(0.5)');
        }
        async down(): Promise<void> {}
      }
      const runner = async () => {
        const base = createDataSource({ url: bouncer.url, throughPooler: true, poolSize: 2, statementTimeoutMs: 0 });
        const one = new DataSource({ ...base.options, migrations: [SlowProbe1764500400001], migrationsTableName: table } as DataSourceOptions);
        opened.push(one);
        await one.initialize();
        return runMigrations(one);
      };
      const started = Date.now();
      const applied = await Promise.all([runner(), runner(), runner()]);
      expect(applied.flat()).to.deep.equal(['SlowProbe1764500400001']);
      expect((await ds.query(`SELECT count(*)::int AS n FROM ${probe}`))[0].n).to.equal(1);
      expect(Date.now() - started).to.be.below(20_000);
      const [{ n }] = await ds.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = 727274`);
      expect(n, 'advisory locks left held').to.equal(0);
      // And the service's own migrations, through the pooler: nothing pending, nothing stuck.
      expect(await runMigrations(await pooled({ statementTimeoutMs: 0 }))).to.deep.equal([]);
    } finally {
      await ds.query(`DROP TABLE IF EXISTS ${probe}, ${table}`);
    }
  });

  it('the service (web and worker processes) through the pooler: sandbox off-ramps all complete, each paid once, the pooler lists them as clients', async () => {
    const service = await startService({ DATABASE_CONNECTION_POOL_URL: bouncer.url, SANDBOX_STEP_MS: '20' });
    try {
      // Each process by its pid, not a count of clients (one process's pool alone could make any count): the web
      // process's connections open on demand and close when idle, so it is asked for a read of the database first.
      const { web, workers } = service.pids();
      await until(async () => {
        await fetch(new URL('/ready', service.base));
        return (await bouncer.listedPids([web, workers!])).length === 2;
      }, { timeoutMs: 30_000, everyMs: 200, what: 'PgBouncer listing the web and the worker process as clients' });
      const key = (await makeBusiness()).sandboxKey;
      const ids = await startOfframps(service, key, 20);
      expect(await untilEnded(ids)).to.deep.equal({ completed: ids.length });
      await expectEachPaidOnce(ids);
    } finally {
      await service.stop();
    }
    expect(bouncer.log()).not.to.match(/unsupported startup parameter|prepared statement .* (already exists|does not exist)/);
  });
});
