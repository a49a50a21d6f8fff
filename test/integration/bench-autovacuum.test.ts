import { expect } from 'chai';
import pg from 'pg';
import { standInForAutovacuum } from '../../bench/autovacuum.js';
import { testDatabaseUrl } from '../env.js';

// The benchmark's stand-in for autovacuum (bench/autovacuum.ts) on this machine's PostgreSQL, which runs without it.
describe("the benchmark's stand-in for autovacuum", () => {
  const suffix = `${process.pid}_${Date.now().toString(36)}`;
  const [grown, still] = [`bench_av_grown_${suffix}`, `bench_av_still_${suffix}`];
  let client: pg.Client;

  before(async () => {
    client = new pg.Client(testDatabaseUrl());
    await client.connect();
  });
  after(async () => {
    await client.query(`DROP TABLE IF EXISTS ${grown}, ${still}`);
    await client.end();
  });

  it("analyzes (and vacuums) a table past autovacuum's thresholds, and leaves one that is not", async function () {
    this.timeout(20_000);
    if ((await client.query('SHOW autovacuum')).rows[0].autovacuum === 'on') this.skip(); // the server does it itself
    await client.query(`CREATE TABLE ${grown} (n integer)`);
    await client.query(`CREATE TABLE ${still} (n integer)`);
    await client.query(`INSERT INTO ${grown} SELECT generate_series(1, 2000)`);
    await client.query(`DELETE FROM ${grown} WHERE n <= 500`);
    const standIn = await standInForAutovacuum(testDatabaseUrl(), 100);
    const seen = async (table: string) =>
      (await client.query(`SELECT last_analyze, last_vacuum FROM pg_stat_user_tables WHERE relname = $1`, [table])).rows[0] as { last_analyze: Date | null; last_vacuum: Date | null } | undefined;
    try {
      // PostgreSQL publishes a backend's table counters within about a second.
      const until = Date.now() + 15_000;
      while (!(await seen(grown))?.last_analyze && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      await standIn.stop();
    }
    const [g, s] = [await seen(grown), await seen(still)];
    expect(g?.last_analyze, 'the grown table analyzed').to.be.an.instanceOf(Date);
    expect(g?.last_vacuum, 'its 500 dead rows vacuumed').to.be.an.instanceOf(Date);
    expect(s?.last_analyze ?? null, 'the unchanged table left alone').to.equal(null);
    expect(standIn.passes().analyzed).to.be.at.least(1);
    expect((await client.query(`SELECT reltuples FROM pg_class WHERE relname = $1`, [grown])).rows[0].reltuples).to.equal(1500);
  });
});
