import { expect } from 'chai';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness } from '../helpers/factories.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { expectLedgerSound, fund, history, kesBeneficiary, offramp, quote, untilStatus } from '../helpers/ramps.js';
import { getDs } from '../helpers/shared.js';
import { buildDocument } from '../../api/openapi/document.js';
import { componentSerializer } from '../../api/openapi/serializers.js';
import { renderedPage, RenderedRows, type RenderedPage } from '../../api/rendered.js';
import { routes, schemas } from '../../api/routes/index.js';
import { CUSTOMER_COLUMNS, CUSTOMER_FROM, customerView, type CustomerRow } from '../../shared/domain/customers.js';

// A transaction's text is kept per row version (api/rendered.ts): whatever changes a row, through the service or
// not, the next read shows it, by id and in a page.
describe('reads of transactions and customers rendered once per row version', function () {
  this.timeout(30_000);
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;
  let beneficiary: string;
  let walletId: string;

  before(async () => {
    api = await startApi();
    pools = await startPools(['pricing', 'settlement', 'providers', 'sandbox']);
    key = (await makeBusiness()).sandboxKey;
    beneficiary = await kesBeneficiary(api, key);
    walletId = (await createCustomer(api, key)).wallet.id;
    await fund(api, key, walletId, '100');
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });
  afterEach(expectLedgerSound);

  const byId = async (id: string) => {
    const res = await api.http.get(`${BASE}/transactions/${id}`).set(bearer(key));
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res;
  };
  const inPage = async (id: string) => {
    const res = await api.http.get(`${BASE}/transactions?limit=5`).set(bearer(key));
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return (res.body.data as Record<string, any>[]).find((t) => t.id === id)!;
  };

  it('a row changed outside the service, its settlement alone, or its status through the pools: the next read shows it', async () => {
    const q = await quote(api, key, { direction: 'offramp', source_amount: '10', beneficiary_id: beneficiary });
    const created = await offramp(api, key, q.id, walletId);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const id = created.body.id as string;
    const done = await untilStatus(api, key, id, ['completed', 'failed']);
    expect(done.status).to.equal('completed');

    // Read twice: the same bytes, the second from the kept text.
    const first = await byId(id);
    expect((await byId(id)).text).to.equal(first.text);
    expect(await inPage(id)).to.deep.equal(await inPage(id));
    expect(first.body.settlement.transaction_id).to.equal(id);
    const inList = await inPage(id);
    expect(inList).to.not.have.property('settlement');
    expect({ ...first.body, settlement: undefined }).to.deep.equal({ ...inList, settlement: undefined });

    // The transaction's row, written by something other than the service's own code.
    const ds = await getDs();
    await ds.query(`UPDATE transactions SET external_reference = 'changed-behind-its-back-Zoë-€' WHERE id = $1`, [id]);
    expect((await byId(id)).body.external_reference).to.equal('changed-behind-its-back-Zoë-€');
    expect((await inPage(id)).external_reference).to.equal('changed-behind-its-back-Zoë-€');

    // Its settlement's row alone: the read by id embeds it, so its version counts too.
    const before = (await byId(id)).body.settlement.required_confirmations as number;
    await ds.query(`UPDATE settlements SET required_confirmations = required_confirmations + 1 WHERE transaction_id = $1`, [id]);
    expect((await byId(id)).body.settlement.required_confirmations).to.equal(before + 1);
    await ds.query(`UPDATE settlements SET required_confirmations = required_confirmations - 1 WHERE transaction_id = $1`, [id]);
    expect((await byId(id)).body.settlement.required_confirmations).to.equal(before);
  });

  it('each status a lifecycle passes through is read no older than PostgreSQL held it just before, by id and in a page', async () => {
    const q = await quote(api, key, { direction: 'offramp', source_amount: '10', beneficiary_id: beneficiary });
    const created = await offramp(api, key, q.id, walletId);
    const id = created.body.id as string;
    const ds = await getDs();
    const reads: { held: string; one: string; listed: string }[] = [];
    for (let i = 0; ; i++) {
      expect(i, 'the off-ramp completed within 400 reads').to.be.lessThan(400);
      const [{ status: held }] = await ds.query(`SELECT status FROM transactions WHERE id = $1`, [id]);
      reads.push({ held, one: (await byId(id)).body.status, listed: (await inPage(id)).status });
      if (held === 'completed') break;
      await new Promise((r) => setTimeout(r, 10));
    }
    // Ranked by the off-ramp's own history (this lifecycle passes each status once): a kept text of an earlier
    // version would read behind the row PostgreSQL held before the request.
    const path = await history(id);
    expect(path[path.length - 1]).to.equal('completed');
    for (const { held, one, listed } of reads) {
      expect(path, `${held} in the history`).to.include(held);
      expect(path.indexOf(one), `by id: ${one} after ${held}`).to.be.at.least(path.indexOf(held));
      expect(path.indexOf(listed), `in a page: ${listed} after ${held}`).to.be.at.least(path.indexOf(held));
    }
  });

  it('a page of customers: a customer changed, or its managed wallet alone, is read as it is now', async () => {
    const customer = await createCustomer(api, key);
    const listed = async () => {
      const res = await api.http.get(`${BASE}/customers?limit=5`).set(bearer(key));
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      return (res.body.data as Record<string, any>[]).find((c) => c.id === customer.id)!;
    };
    const first = await listed();
    expect(await listed()).to.deep.equal(first);
    expect(first.wallet.status).to.equal('active');
    const ds = await getDs();
    await ds.query(`UPDATE customers SET display_name = 'Zoë Wanjiru' WHERE id = $1`, [customer.id]);
    expect((await listed()).display_name).to.equal('Zoë Wanjiru');
    await ds.query(`UPDATE wallets SET status = 'archived', archived_at = now() WHERE id = $1`, [customer.wallet.id]);
    expect((await listed()).wallet.status).to.equal('archived');
    await ds.query(`UPDATE wallets SET status = 'active', archived_at = NULL WHERE id = $1`, [customer.wallet.id]);
    const now = await listed();
    // The customer's update moved its updated_at (the updated_at_moves trigger); everything else is as it was.
    expect(now.updated_at).to.not.equal(first.updated_at);
    expect({ ...now, updated_at: null }).to.deep.equal({ ...first, display_name: 'Zoë Wanjiru', updated_at: null });
  });

  it('a page read again keeps its order, cursor and kept rows, and renders only the row that changed, wherever it is', async () => {
    for (let i = 0; i < 4; i++) await createCustomer(api, key);
    const page = async () => {
      const res = await api.http.get(`${BASE}/customers?limit=3`).set(bearer(key));
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      return res.body as { data: Record<string, any>[]; has_more: boolean; next_cursor: string | null };
    };
    const first = await page();
    expect(first.data).to.have.length(3);
    expect(first.has_more).to.equal(true);
    const middle = first.data[1].id as string;
    const ds = await getDs();
    await ds.query(`UPDATE customers SET metadata = '{"tier":"gold"}' WHERE id = $1`, [middle]);
    const again = await page();
    expect(again.data.map((c) => c.id)).to.deep.equal(first.data.map((c) => c.id));
    expect(again.next_cursor).to.equal(first.next_cursor);
    expect(again.data[0]).to.deep.equal(first.data[0]);
    expect(again.data[2]).to.deep.equal(first.data[2]);
    expect(again.data[1].metadata).to.deep.equal({ tier: 'gold' });
    // The next page follows on from the cursor as before.
    const next = await api.http.get(`${BASE}/customers?limit=3&starting_after=${again.next_cursor}`).set(bearer(key));
    expect(next.body.data[0].id).to.not.be.oneOf(again.data.map((c) => c.id));
  });

  it('a page renders only the rows whose version it has not kept; a row that stops matching between its two reads is left out', async () => {
    const own = (await makeBusiness()).sandboxKey;
    const made: string[] = [];
    for (let i = 0; i < 4; i++) made.push((await createCustomer(api, own)).id);
    const ds = await getDs();
    const [{ business_id: businessId }] = await ds.query(`SELECT business_id FROM customers WHERE id = $1`, [made[0]]);
    const texts = new RenderedRows(componentSerializer(buildDocument(routes, schemas), 'Customer', true));
    let views = 0;
    const view = (row: CustomerRow) => {
      views += 1;
      return customerView(row);
    };
    const list = {
      columns: CUSTOMER_COLUMNS, from: CUSTOMER_FROM, table: 'customers c', alias: 'c', view,
      where: ['c.business_id = $1', 'c.environment = $2', 'c.status = $3'], params: [businessId, 'sandbox', 'active'],
    };
    const ids = (page: RenderedPage) => page.page.data.map((bytes) => JSON.parse(bytes.toString()).id as string);

    const first = await renderedPage<CustomerRow>(ds, list, { limit: 3 }, texts);
    expect(ids(first)).to.deep.equal([made[3], made[2], made[1]]);
    expect(first.page.has_more).to.equal(true);
    expect(views).to.equal(3);
    const again = await renderedPage<CustomerRow>(ds, list, { limit: 3 }, texts);
    expect(views, 'every row kept: none rendered again').to.equal(3);
    expect(again.page).to.deep.equal(first.page);

    await ds.query(`UPDATE customers SET display_name = 'Moved' WHERE id = $1`, [made[2]]);
    const third = await renderedPage<CustomerRow>(ds, list, { limit: 3 }, texts);
    expect(views, 'the changed row alone rendered').to.equal(4);
    expect(ids(third)).to.deep.equal(ids(first));
    expect(third.page.next_cursor).to.equal(first.page.next_cursor);
    expect(JSON.parse(third.page.data[1].toString()).display_name).to.equal('Moved');
    expect(third.page.data[0]).to.deep.equal(first.page.data[0]);

    // Changed again (so not kept), then archived by another transaction between the page's two reads: it no longer
    // matches the list's status condition, and is left out; the cursor still goes on where the first read stopped.
    await ds.query(`UPDATE customers SET display_name = 'Again' WHERE id = $1`, [made[2]]);
    let reads = 0;
    const racing = {
      query: async (text: string, params: unknown[]) => {
        const rows = await ds.query(text, params);
        if (++reads === 1) await ds.query(`UPDATE customers SET status = 'archived', archived_at = now() WHERE id = $1`, [made[2]]);
        return rows;
      },
    };
    const raced = await renderedPage<CustomerRow>(racing as never, list, { limit: 3 }, texts);
    expect(reads).to.equal(2);
    expect(ids(raced)).to.deep.equal([made[3], made[1]]);
    expect(raced.page.next_cursor).to.equal(first.page.next_cursor);
    const next = await renderedPage<CustomerRow>(ds, list, { limit: 3, starting_after: raced.page.next_cursor! }, texts);
    expect(ids(next)).to.deep.equal([made[0]]);
  });

  it('a managed wallet changed (outside the service: it never updates one) moves its customer\'s version', async () => {
    const customer = await createCustomer(api, key);
    const ds = await getDs();
    await ds.query(`UPDATE customers SET updated_at = '2026-01-01T00:00:00Z' WHERE id = $1`, [customer.id]);
    const [{ xmin: before }] = await ds.query(`SELECT xmin::text FROM customers WHERE id = $1`, [customer.id]);
    await ds.query(`UPDATE wallets SET label = 'changed' WHERE id = $1`, [customer.wallet.id]);
    const [{ xmin: after, at }] = await ds.query(`SELECT xmin::text, updated_at::text AS at FROM customers WHERE id = $1`, [customer.id]);
    expect(after).to.not.equal(before);
    expect(at).to.not.equal('2026-01-01 00:00:00+00');
  });

  it('on every table a read renders by version, an update that leaves updated_at moves it; one that sets it keeps its value', async () => {
    const customer = await createCustomer(api, key);
    const ds = await getDs();
    const updatedAt = async (table: string, id: string) => ((await ds.query(`SELECT updated_at::text AS at FROM ${table} WHERE id = $1`, [id]))[0].at as string);
    const [{ id: transactionId }] = await ds.query(`SELECT id FROM transactions WHERE business_id = (SELECT business_id FROM customers WHERE id = $1) LIMIT 1`, [customer.id]);
    const [{ id: settlementId }] = await ds.query(`SELECT id FROM settlements WHERE transaction_id = $1`, [transactionId]);
    for (const [table, id, change] of [
      ['transactions', transactionId, `external_reference = external_reference`],
      ['settlements', settlementId, `required_confirmations = required_confirmations`],
      ['customers', customer.id, `display_name = display_name`],
      ['wallets', customer.wallet.id, `label = label`],
    ] as const) {
      await ds.query(`UPDATE ${table} SET updated_at = '2026-01-01T00:00:00Z' WHERE id = $1`, [id]);
      expect(await updatedAt(table, id), table).to.equal('2026-01-01 00:00:00+00');
      await ds.query(`UPDATE ${table} SET ${change} WHERE id = $1`, [id]);
      const moved = await updatedAt(table, id);
      expect(moved, table).to.not.equal('2026-01-01 00:00:00+00');
      expect(Date.parse(moved.replace(' ', 'T').replace(/\+00$/, 'Z')), table).to.be.closeTo(Date.now(), 60_000);
    }
  });
});
