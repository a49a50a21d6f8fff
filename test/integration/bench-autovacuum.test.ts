import { expect } from 'chai';
import pg from 'pg';
import { standInForAutovacuum } from '../../bench/autovacuum.js';
import { testDatabaseUrl } from '../env.js';

// The benchmark's stand-in for autovacuum (bench/autovacuum.ts) on this machine's PostgreSQL, which runs without it.
describe("the benchmark's stand-in for autovacuum", () => {
  const suffix = `${process.pid}_${Date.now().toString(36)}`;
  const [grown, still, large, settled] = [`bench_av_grown_${suffix}`, `bench_av_still_${suffix}`, `bench_av_large_${suffix}`, `bench_av_settled_${suffix}`];
  let client: pg.Client;

  before(async () => {
    client = new pg.Client(testDatabaseUrl());
    await client.connect();
  });
  after(async () => {
    await client.query(`DROP TABLE IF EXISTS ${grown}, ${still}, ${large}, ${settled}`);
    await client.end();
  });

  const stats = async (table: string) =>
    (await client.query(`SELECT last_analyze, last_vacuum, analyze_count, vacuum_count, n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = $1`, [table]))
      .rows[0] as { last_analyze: Date | null; last_vacuum: Date | null; analyze_count: string; vacuum_count: string; n_mod_since_analyze: string };
  const until = async (done: () => Promise<boolean>) => {
    // PostgreSQL publishes a backend's table counters within about a second.
    for (const end = Date.now() + 15_000; !(await done()) && Date.now() < end;) await new Promise((resolve) => setTimeout(resolve, 100));
  };

  it("analyzes and vacuums a table past autovacuum's thresholds, and leaves one that is not", async function () {
    this.timeout(30_000);
    if ((await client.query('SHOW autovacuum')).rows[0].autovacuum === 'on') this.skip(); // the server does it itself
    await client.query(`CREATE TABLE ${grown} (n integer)`);
    await client.query(`CREATE TABLE ${still} (n integer)`);
    await client.query(`CREATE TABLE ${large} (n integer)`);
    await client.query(`INSERT INTO ${grown} SELECT generate_series(1, 2000)`);
    await client.query(`DELETE FROM ${grown} WHERE n <= 500`);
    // 10,000 rows, analyzed: 500 changes since are under the analyze threshold (50 + 10% of its rows) and 500 dead rows
    // under the vacuum threshold (50 + 20%).
    await client.query(`INSERT INTO ${large} SELECT generate_series(1, 10000)`);
    // Its inserts counted first (a backend publishes them up to a second later, after an analyze that would be reset).
    await until(async () => Number((await stats(large))?.n_mod_since_analyze) >= 10_000);
    await client.query(`VACUUM (ANALYZE) ${large}`);
    await client.query(`UPDATE ${large} SET n = -n WHERE n <= 500`);
    await until(async () => Number((await stats(large))?.n_mod_since_analyze) >= 500);
    expect(Number((await stats(large)).n_mod_since_analyze)).to.equal(500);

    const standIn = await standInForAutovacuum(testDatabaseUrl(), 100, [grown, still, large]);
    try {
      await until(async () => Boolean((await stats(grown))?.last_analyze));
      await new Promise((resolve) => setTimeout(resolve, 500)); // a few more passes
    } finally {
      await standIn.stop();
    }
    const [g, s, l] = [await stats(grown), await stats(still), await stats(large)];
    expect(g.last_analyze, 'the grown table analyzed').to.be.an.instanceOf(Date);
    expect(g.last_vacuum, 'its 500 dead rows vacuumed').to.be.an.instanceOf(Date);
    expect(s.last_analyze, 'the unchanged table left alone').to.equal(null);
    expect(s.last_vacuum).to.equal(null);
    expect([l.analyze_count, l.vacuum_count], 'the large table: only its own analyze and vacuum').to.deep.equal(['1', '1']);
    expect(standIn.passes()).to.deep.equal({ analyzed: 1, vacuumed: 1 });
    expect((await client.query(`SELECT reltuples FROM pg_class WHERE relname = $1`, [grown])).rows[0].reltuples).to.equal(1500);
  });

  it('settles on request: what is due is analyzed before settle() answers, not at its next pass', async function () {
    this.timeout(30_000);
    if ((await client.query('SHOW autovacuum')).rows[0].autovacuum === 'on') this.skip();
    await client.query(`CREATE TABLE ${settled} (n integer)`);
    // Its next pass an hour away: only settle() can analyze it within this test.
    const standIn = await standInForAutovacuum(testDatabaseUrl(), 3_600_000, [settled]);
    try {
      await client.query(`INSERT INTO ${settled} SELECT generate_series(1, 2000)`);
      await until(async () => Number((await stats(settled))?.n_mod_since_analyze) >= 2000);
      expect((await stats(settled)).last_analyze).to.equal(null);
      await standIn.settle();
      expect(standIn.passes().analyzed).to.equal(1);
    } finally {
      await standIn.stop();
    }
    await until(async () => Boolean((await stats(settled))?.last_analyze));
    expect((await stats(settled)).last_analyze, 'analyzed by settle()').to.be.an.instanceOf(Date);
  });
});
