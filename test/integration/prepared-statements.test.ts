import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import type { DataSource } from 'typeorm';
import { createDataSource } from '../../shared/db/data-source.js';
import { inUnit, type UnitDeps } from '../../shared/db/unit-of-work.js';
import { byIdInScope, planOnce } from '../../shared/db/prepared-client.js';
import { getDs } from '../helpers/shared.js';
import { listPage } from '../../shared/db/pagination.js';
import { commitWith } from '../../shared/db/transaction-client.js';

/** Prepared statements (shared/db/prepared-client.ts), against the real PostgreSQL, with one connection so it is known which one prepared what. */
describe('prepared statements', () => {
  let one: DataSource;
  let ds: DataSource;
  let table: string;
  before(async () => {
    ds = await getDs();
    one = createDataSource({ poolSize: 1 });
    await one.initialize();
  });
  after(() => one.destroy());
  beforeEach(async () => {
    table = `prep_probe_${randomUUID().slice(0, 8)}`;
    await ds.query(`CREATE TABLE ${table} (a int PRIMARY KEY)`);
    await ds.query(`INSERT INTO ${table} (a) VALUES (1), (2)`);
  });
  afterEach(() => ds.query(`DROP TABLE IF EXISTS ${table}`));

  const prepared = async (): Promise<string[]> => (await one.query(`SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%' || $1 || '%'`, [table])).map((r: { statement: string }) => r.statement);

  it('prepares a statement marked by planOnce once per connection, and leaves every other statement unnamed', async () => {
    const text = planOnce(`SELECT a FROM ${table} WHERE a = $1`);
    expect(await one.query(text, [1])).to.deep.equal([{ a: 1 }]);
    expect(await one.query(text, [2])).to.deep.equal([{ a: 2 }]);
    expect(await one.query(`SELECT a FROM ${table} WHERE a > $1`, [1])).to.deep.equal([{ a: 2 }]);
    await one.query(`SELECT count(*) FROM ${table}`);
    expect(await prepared()).to.deep.equal([text]);
    // The connection loses it (DEALLOCATE ALL, DISCARD ALL): prepared again, not an error.
    await one.query('DEALLOCATE ALL');
    expect(await one.query(text, [2])).to.deep.equal([{ a: 2 }]);
    expect(await prepared()).to.deep.equal([text]);
  });

  it('describes a prepared statement\'s rows once per connection: later runs ask for no description and read the same rows', async () => {
    const text = planOnce(`SELECT a, a::text AS t, (a * 1.5)::numeric AS n, timestamptz '2026-11-29 12:00:00+00' AS at FROM ${table} WHERE a >= $1 ORDER BY a`);
    await one.query('SELECT 1');
    type Client = { connection: { on(e: string, f: () => void): void }; query(text: string, values: unknown[]): Promise<unknown> };
    const client = (one.driver as unknown as { master: { _clients: Client[] } }).master._clients[0];
    let described = 0;
    client.connection.on('rowDescription', () => (described += 1));
    const rows = [
      { a: 1, t: '1', n: '1.5', at: new Date('2026-11-29T12:00:00Z') },
      { a: 2, t: '2', n: '3.0', at: new Date('2026-11-29T12:00:00Z') },
    ];
    expect(await one.query(text, [1])).to.deep.equal(rows);
    expect(await one.query(text, [1])).to.deep.equal(rows);
    expect(await one.query(text, [9])).to.deep.equal([]);
    expect(described).to.equal(1);
    // In a unit: as its first statement (sent with the opening), with no row, and as its last (sent with the COMMIT).
    const deps = { ds: one, queues: undefined, log: pino({ level: 'silent' }) } as unknown as UnitDeps;
    const inside = await inUnit(deps, async (unit) => [await unit.em.query(text, [2]), await unit.em.query(text, [9]), await commitWith(unit.em, text, [1])]);
    expect(inside).to.deep.equal([rows.slice(1), [], rows]);
    const empty = await inUnit(deps, async (unit) => [await unit.em.query(text, [9]), await unit.em.query(text, [2]), await commitWith(unit.em, text, [9])]);
    expect(empty).to.deep.equal([[], rows.slice(1), []]);
    expect(described).to.equal(1);
    // Lost by the connection: prepared and described again, once.
    await one.query('DEALLOCATE ALL');
    expect(await one.query(text, [1])).to.deep.equal(rows);
    expect(await one.query(text, [2])).to.deep.equal(rows.slice(1));
    expect(described).to.equal(2);
    // A failing statement's error leads back to its caller, not to the socket's read.
    const failing = planOnce(`INSERT INTO ${table} (a) VALUES ($1)`);
    await client.query(failing, [7]);
    let err: (Error & { code?: string }) | null = null;
    try {
      await client.query(failing, [7]);
    } catch (caught) {
      err = caught as Error & { code?: string };
    }
    expect(err?.code).to.equal('23505');
    expect(err?.stack).to.include('prepared-statements.test.ts');
  });

  it('a list page is prepared when it filters by its business and environment alone; a filtered page is planned for its values', async () => {
    const business = randomUUID();
    const spec = (status?: string) => ({
      columns: 'c.id', from: 'customers c', alias: 'c',
      where: ['c.business_id = $1', 'c.environment = $2', ...(status ? ['c.status = $3'] : [])], params: [business, 'sandbox', ...(status ? [status] : [])],
    });
    for (const status of [undefined, 'active', undefined, 'archived']) {
      expect((await listPage(one, spec(status), { limit: 5 }, (r) => r)).data).to.deep.equal([]);
    }
    const pages: string[] = (await one.query(`SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%FROM customers c WHERE c.business_id = $1%'`))
      .map((r: { statement: string }) => r.statement);
    expect(pages).to.have.length(1);
    expect(pages[0]).to.not.include('c.status');
  });

  it('a scoped read by id is found by its primary key even by a generic plan made without statistics', async () => {
    const runner = ds.createQueryRunner();
    await runner.connect();
    try {
      await runner.query('SET plan_cache_mode = force_generic_plan');
      await runner.query(`PREPARE scoped AS SELECT t.id FROM transactions t WHERE ${byIdInScope('t')}`);
      const plan = (await runner.query('EXPLAIN EXECUTE scoped(NULL, NULL, NULL)')).map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
      expect(plan).to.match(/transactions_pkey/);
      expect(plan).not.to.match(/scope_idx/);
    } finally {
      await runner.query('DEALLOCATE scoped').catch(() => undefined);
      await runner.query('RESET plan_cache_mode').catch(() => undefined);
      await runner.release();
    }
  });

  it('a statement on its own whose `*` result a migration widened is run again unnamed, and is not prepared again', async () => {
    const text = planOnce(`SELECT * FROM ${table} WHERE a = $1`);
    expect(await one.query(text, [1])).to.deep.equal([{ a: 1 }]);
    // A release-phase migration, from another connection, while this process runs.
    await ds.query(`ALTER TABLE ${table} ADD COLUMN b int NOT NULL DEFAULT 7`);
    expect(await one.query(text, [1])).to.deep.equal([{ a: 1, b: 7 }]);
    expect(await one.query(text, [2])).to.deep.equal([{ a: 2, b: 7 }]);
  });

  it('a unit of work that met such a statement is run again from the start, and commits once', async () => {
    const text = planOnce(`SELECT t.* FROM ${table} t WHERE a = $1`);
    await one.query(text, [1]);
    await ds.query(`ALTER TABLE ${table} ADD COLUMN b int NOT NULL DEFAULT 7`);
    const deps = { ds: one, queues: undefined, log: pino({ level: 'silent' }) } as unknown as UnitDeps;
    let attempts = 0;
    const row = await inUnit(deps, async (unit) => {
      attempts += 1;
      await unit.em.query(`INSERT INTO ${table} (a) VALUES ($1)`, [3]);
      return (await unit.em.query(text, [1]))[0];
    });
    expect(row).to.deep.equal({ a: 1, b: 7 });
    expect(attempts).to.equal(2);
    expect(await ds.query(`SELECT a FROM ${table} ORDER BY a`)).to.deep.equal([{ a: 1 }, { a: 2 }, { a: 3 }]);
  });
});
