import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { getDs } from '../helpers/shared.js';
import { testDatabaseUrl } from '../env.js';
import { inUnit, type UnitDeps } from '../../shared/db/unit-of-work.js';
import { closeRecord, insertRecord, recordRefOf, recordReplace, recordScopeKey, replacementParams, type DurableAnswer, type Replacement } from '../../shared/db/idempotency-records.js';
import { logger } from '../../shared/logger.js';
import { makeBusiness } from '../helpers/factories.js';

/**
 * A POST /quotes record is written replaceable (202 pending); the pricing unit replaces it with the priced answer while
 * the request waits, and the request closes it when its wait runs out. Whichever comes first decides what the record
 * holds, and the request sends what it holds: a replay always shows what was sent.
 */
describe('an answer the awaited work may replace', () => {
  let businessId: string;
  before(async () => {
    ({ businessId } = await makeBusiness());
  });
  const pending = (): DurableAnswer => ({
    scopeKey: recordScopeKey(randomUUID(), 'sandbox', randomUUID()), fingerprint: 'fp', status: 202, body: '{"status":"pending"}', requestId: `req_${randomUUID()}`, replaceable: true,
  });
  const read = async (a: DurableAnswer) =>
    (await (await getDs()).query(`SELECT status, body, replaceable FROM idempotency_records WHERE scope_key = $1`, [a.scopeKey]))[0];
  /** The pricing unit's replacement, written by a unit's last statement (here a unit with no events: its records alone). */
  const replace = async (a: DurableAnswer, body: string, withEvent = false): Promise<boolean | undefined> => {
    const deps = { ds: await getDs(), log: logger() } as unknown as UnitDeps;
    let replacement: Replacement | undefined;
    await inUnit(deps, async (unit) => {
      // With an event, the replacement rides the unit's events-and-jobs statement; without, a statement of records alone.
      if (withEvent) unit.event({ businessId, environment: 'sandbox' }, 'quote.available', { id: randomUUID() });
      return body;
    }, { replace: (b) => (replacement = { ref: recordRefOf(a), status: 201, body: b }) });
    return replacement!.replaced;
  };

  it('the work replaces a replaceable answer once, closing it', async () => {
    const a = pending();
    expect(await insertRecord(await getDs(), a)).to.equal(true);
    expect(await read(a)).to.deep.equal({ status: 202, body: a.body, replaceable: true });
    expect(await replace(a, '{"status":"available"}')).to.equal(true);
    expect(await read(a)).to.deep.equal({ status: 201, body: '{"status":"available"}', replaceable: false });
    expect(await replace(a, '{"status":"available","again":true}')).to.equal(false);
    expect((await read(a)).body).to.equal('{"status":"available"}');
    // The request that waited for it, closing it late, sends the work's answer.
    expect(await closeRecord(await getDs(), a)).to.deep.equal({ status: 201, body: '{"status":"available"}', closedHere: false });
  });

  it('a record the request closed first is never replaced: it holds what the request sent', async () => {
    const a = pending();
    await insertRecord(await getDs(), a);
    expect(await closeRecord(await getDs(), a)).to.deep.equal({ status: 202, body: a.body, closedHere: true });
    expect(await closeRecord(await getDs(), a), 'closed again').to.deep.equal({ status: 202, body: a.body, closedHere: false });
    expect(await replace(a, '{"status":"available"}')).to.equal(false);
    expect(await replace(a, '{"status":"available"}', true), 'beside an event').to.equal(false);
    expect(await read(a)).to.deep.equal({ status: 202, body: a.body, replaceable: false });
  });

  it('the unit\'s events-and-jobs statement replaces it too, and says so', async () => {
    const a = pending();
    await insertRecord(await getDs(), a);
    expect(await replace(a, '{"status":"available"}', true)).to.equal(true);
    expect(await read(a)).to.deep.equal({ status: 201, body: '{"status":"available"}', replaceable: false });
  });

  it('a record no request wrote replaceable is never replaced', async () => {
    const a = { ...pending(), status: 201, replaceable: false };
    await insertRecord(await getDs(), a);
    await replace(a, '{"other":true}');
    expect(await read(a)).to.deep.equal({ status: 201, body: a.body, replaceable: false });
  });

  describe('a close that meets a replacement not yet committed', () => {
    let other: pg.Client;
    beforeEach(async () => {
      other = new pg.Client(testDatabaseUrl());
      await other.connect();
    });
    afterEach(() => other.end());

    it('waits for it, and answers the replaced answer', async () => {
      const a = pending();
      await insertRecord(await getDs(), a);
      await other.query('BEGIN');
      const replaced = await other.query(recordReplace(1), replacementParams({ ref: recordRefOf(a), status: 201, body: '{"status":"available"}' }));
      expect(replaced.rowCount).to.equal(1);
      let done = false;
      const closing = closeRecord(await getDs(), a).finally(() => (done = true));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(done, 'the close waits for the replacing unit').to.equal(false);
      await other.query('COMMIT');
      expect(await closing).to.deep.equal({ status: 201, body: '{"status":"available"}', closedHere: false });
    });

    it('a replacement that waits for a close replaces nothing', async () => {
      const a = pending();
      await insertRecord(await getDs(), a);
      await other.query('BEGIN');
      await other.query(`UPDATE idempotency_records SET replaceable = false WHERE scope_key = $1 RETURNING status, body`, [a.scopeKey]);
      const ds = await getDs();
      let done = false;
      const replacing = ds.query(recordReplace(1), replacementParams({ ref: recordRefOf(a), status: 201, body: '{"status":"available"}' })).finally(() => (done = true));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(done, 'the replacement waits for the close').to.equal(false);
      await other.query('COMMIT');
      const [rows] = (await replacing) as [unknown[], number];
      expect(rows).to.have.length(0);
      expect(await read(a)).to.deep.equal({ status: 202, body: a.body, replaceable: false });
    });
  });
});
