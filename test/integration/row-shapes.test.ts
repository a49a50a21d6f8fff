import { expect } from 'chai';
import pg from 'pg';
import { rowShapesMatchPg, shareRowShapes } from '../../shared/db/row-shapes.js';
import { getConfig } from '../../shared/config.js';

/** Results reuse one empty row per column list (shared/db/row-shapes.ts); the rows are what pg's own parsing gives. */
describe('shared row shapes', () => {
  let client: pg.Client;
  before(async () => {
    shareRowShapes();
    client = new pg.Client({ connectionString: getConfig().databaseUrl });
    await client.connect();
  });
  after(() => client.end());

  it('is installed: pg still copies each row from the empty row it replaces', () => {
    // A pg that parses rows another way fails here: the replacement is then left out, and must be looked at again.
    expect(rowShapesMatchPg()).to.equal(true);
    expect(shareRowShapes()).to.equal(true);
  });

  it('gives each row its own columns, types and nulls, in order, for repeated and different column lists', async () => {
    const wide = `SELECT $1::int AS a, NULL::text AS b, '2026-11-29T10:00:00Z'::timestamptz AS c, 12.5::numeric::text AS d, true AS e`;
    const first = (await client.query(wide, [1])).rows;
    first[0].a = 99; // a row written to must not leak into the next result with the same columns
    first[0].extra = 'x';
    const again = await client.query(wide, [2]);
    expect(again.rows).to.have.length(1);
    expect(Object.keys(again.rows[0])).to.deep.equal(['a', 'b', 'c', 'd', 'e']);
    expect(again.rows[0]).to.deep.equal({ a: 2, b: null, c: new Date('2026-11-29T10:00:00Z'), d: '12.5', e: true });
    expect(again.fields.map((f) => f.name)).to.deep.equal(['a', 'b', 'c', 'd', 'e']);

    const other = await client.query('SELECT 7 AS b, 8 AS a');
    expect(Object.keys(other.rows[0])).to.deep.equal(['b', 'a']);
    const many = await client.query('SELECT g AS a, NULL::int AS b FROM generate_series(1, 3) g');
    expect(many.rows).to.deep.equal([{ a: 1, b: null }, { a: 2, b: null }, { a: 3, b: null }]);
    expect(many.rows[0]).to.not.equal(many.rows[1]);
  });

  it('keeps each result of a multi-statement query to its own columns, and a column named __proto__ an own column', async () => {
    const results = (await client.query('SELECT 1 AS x; SELECT 2 AS y, 3 AS z')) as unknown as pg.QueryResult[];
    expect(results.map((r) => r.rows)).to.deep.equal([[{ x: 1 }], [{ y: 2, z: 3 }]]);
    const proto = (await client.query('SELECT 5 AS "__proto__", 6 AS q')).rows[0];
    expect(Object.prototype.hasOwnProperty.call(proto, '__proto__')).to.equal(true);
    expect(Object.getOwnPropertyDescriptor(proto, '__proto__')?.value).to.equal(5);
    expect(proto.q).to.equal(6);
  });

  it('answers a statement with no columns as pg does', async () => {
    const result = await client.query('SET LOCAL statement_timeout = 1000');
    expect(result.rows).to.deep.equal([]);
    expect(result.fields).to.deep.equal([]);
  });
});
