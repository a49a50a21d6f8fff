import { expect } from 'chai';
import { randomBytes, randomUUID } from 'node:crypto';
import pino from 'pino';
import type { DataSource } from 'typeorm';
import { createDataSource } from '../../shared/db/data-source.js';
import { commitWith } from '../../shared/db/transaction-client.js';
import { inUnit, type UnitDeps } from '../../shared/db/unit-of-work.js';
import { getDs } from '../helpers/shared.js';
import { makeBusiness } from '../helpers/factories.js';
import { refillAddressPool } from '../../shared/chain/address-pool.js';
import { createCustomer } from '../../shared/domain/customers.js';
import { getConfig } from '../../shared/config.js';

/**
 * Transactions open with their first statement and a unit commits with its last (shared/db/transaction-client.ts),
 * against the real PostgreSQL, on a pool of one connection whose round trips (ReadyForQuery messages) are counted.
 */
describe('transactions without round trips of their own', () => {
  let one: DataSource;
  let ds: DataSource;
  let table: string;
  let roundTrips = 0;
  before(async () => {
    ds = await getDs();
    one = createDataSource({ poolSize: 1, statementTimeoutMs: 300 });
    await one.initialize();
    const pool = (one.driver as unknown as { master: { _clients: { connection: NodeJS.EventEmitter }[]; on(e: 'connect', f: (c: { connection: NodeJS.EventEmitter }) => void): void } }).master;
    const count = (c: { connection: NodeJS.EventEmitter }) => c.connection.on('readyForQuery', () => (roundTrips += 1));
    pool._clients.forEach(count);
    pool.on('connect', count);
  });
  after(() => one.destroy());
  beforeEach(async () => {
    table = `tx_probe_${randomUUID().slice(0, 8)}`;
    // A deferred unique check: PostgreSQL makes it at COMMIT.
    await ds.query(`CREATE TABLE ${table} (a int, CONSTRAINT ${table}_a UNIQUE (a) DEFERRABLE INITIALLY DEFERRED)`);
  });
  afterEach(() => ds.query(`DROP TABLE IF EXISTS ${table}`));

  const rows = async () => (await ds.query(`SELECT a FROM ${table} ORDER BY a`)).map((r: { a: number }) => r.a);
  const unitDeps = (): UnitDeps => ({ ds: one, queues: {} as UnitDeps['queues'], log: pino({ level: 'silent' }) });
  const answer = () => ({ scopeKey: randomBytes(32), fingerprint: 'fp', status: 201, body: '{}', requestId: randomUUID() });

  it('a unit of two statements and its idempotency record takes three round trips: the opening goes with the first, the COMMIT with the last', async () => {
    roundTrips = 0;
    const key = answer();
    await inUnit(unitDeps(), async (unit) => {
      await unit.em.query(`INSERT INTO ${table} (a) VALUES ($1)`, [1]);
      await unit.em.query(`INSERT INTO ${table} (a) VALUES ($1)`, [2]);
      return 'done';
    }, { answer: () => key });
    expect(roundTrips).to.equal(3);
    expect(await rows()).to.deep.equal([1, 2]);
    const [record] = await ds.query(`SELECT status, request_id FROM idempotency_records WHERE scope_key = $1`, [key.scopeKey]);
    expect(record).to.deep.equal({ status: 201, request_id: key.requestId });
    // The connection is idle and outside any transaction: what runs next commits on its own.
    await one.query(`INSERT INTO ${table} (a) VALUES ($1)`, [3]);
    expect(await rows()).to.deep.equal([1, 2, 3]);
  });

  it('a transaction that runs nothing sends nothing', async () => {
    roundTrips = 0;
    await one.transaction(async () => undefined);
    await one.transaction(async () => {
      throw new Error('given up');
    }).catch(() => undefined);
    expect(roundTrips).to.equal(0);
  });

  it('a first statement that fails takes the transaction down with it, and the connection serves the next', async () => {
    const failed = await one.transaction(async (em) => {
      await em.query(`INSERT INTO ${table} (a) VALUES ($1::int)`, ['not a number']);
    }).catch((err: { code?: string }) => err);
    expect((failed as { code?: string }).code).to.equal('22P02');
    expect(await one.query(`SELECT 1 AS one WHERE $1::int = 1`, [1])).to.deep.equal([{ one: 1 }]);
    expect(await rows()).to.deep.equal([]);
  });

  it('what runs after the opening is inside the transaction: given up, nothing stays, with or without parameters', async () => {
    for (const first of [[`INSERT INTO ${table} (a) VALUES ($1)`, [1]], [`INSERT INTO ${table} (a) VALUES (1)`, undefined]] as const) {
      await one.transaction(async (em) => {
        await em.query(first[0], first[1] as unknown[] | undefined);
        throw new Error('given up');
      }).catch(() => undefined);
    }
    expect(await rows()).to.deep.equal([]);
  });

  it('the statement timeout goes with the opening', async () => {
    const slow = await one.transaction((em) => em.query('SELECT pg_sleep($1)', [2])).catch((err: { code?: string }) => err);
    expect((slow as { code?: string }).code).to.equal('57014');
  });

  it('a last statement that fails skips the COMMIT behind it: nothing of the unit stays', async () => {
    const key = answer();
    await ds.query(`INSERT INTO idempotency_records (scope_key, fingerprint, status, body, request_id) VALUES ($1, 'x', 200, '{}', 'earlier')`, [key.scopeKey]);
    const failed = await inUnit(unitDeps(), async (unit) => {
      await unit.em.query(`INSERT INTO ${table} (a) VALUES ($1)`, [1]);
      return 'done';
    }, { answer: () => key }).catch((err: { code?: string }) => err);
    expect((failed as { code?: string }).code).to.equal('23505');
    expect(await rows()).to.deep.equal([]);
    await one.query(`INSERT INTO ${table} (a) VALUES ($1)`, [5]);
    expect(await rows()).to.deep.equal([5]);
  });

  it('a COMMIT that fails (a deferred check) fails the last statement\'s caller, and nothing is committed', async () => {
    const failed = await one.transaction(async (em) => {
      await em.query(`INSERT INTO ${table} (a) VALUES ($1)`, [7]);
      await commitWith(em, `INSERT INTO ${table} (a) VALUES ($1) RETURNING a`, [7]);
    }).catch((err: { code?: string }) => err);
    expect((failed as { code?: string }).code).to.equal('23505');
    expect(await rows()).to.deep.equal([]);
    await one.query(`INSERT INTO ${table} (a) VALUES ($1)`, [8]);
    expect(await rows()).to.deep.equal([8]);
  });

  it('a customer\'s create is two round trips: the customer, its claimed address, wallet and answer in one statement with the opening; its record with the COMMIT', async () => {
    const biz = await makeBusiness();
    const scope = { businessId: biz.businessId, environment: 'sandbox' as const };
    await refillAddressPool(ds, 'sandbox', getConfig().wallets.sandbox.xpub, 5);
    const create = (reference: string) => inUnit(unitDeps(), (unit) => createCustomer(unit.em, getConfig().wallets, scope, { external_reference: reference }), { answer: answer });
    roundTrips = 0;
    const made = await create('two-trips');
    expect(roundTrips).to.equal(2);
    expect(made.created).to.equal(true);
    const [wallet] = await ds.query(`SELECT address, hd_index FROM wallets WHERE customer_id = $1`, [made.customer.id]);
    expect(made.customer).to.include({ external_reference: 'two-trips', wallet_address: wallet.address, wallet_ownership_status: 'managed', wallet_status: 'active' });
    expect(await ds.query(`SELECT 1 FROM hd_address_pool WHERE hd_index = $1`, [wallet.hd_index])).to.deep.equal([]);
    // The reference again: nothing created, the same customer answered.
    const again = await create('two-trips');
    expect(again).to.deep.include({ created: false });
    expect(again.customer.id).to.equal(made.customer.id);
  });
});
