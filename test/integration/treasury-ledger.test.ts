import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey, writeHeaders, type TestBusiness } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { responseAjv } from '../fuzz/operations.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { postEntry, type EntryInput, type LedgerAccount } from '../../shared/domain/ledger.js';
import type { EventScope } from '../../shared/domain/events.js';
import { scaleOf, toMinor } from '../../shared/domain/money.js';

const BALANCE = `${BASE}/treasury/balance`;
const LEDGER = `${BASE}/treasury/ledger`;
const TREASURY: LedgerAccount = { kind: 'treasury', asset: 'USDC' };
const PENDING: LedgerAccount = { kind: 'treasury_pending', asset: 'USDC' };
const INBOUND: LedgerAccount = { kind: 'inbound_clearing', asset: 'USDC' };

interface Posting {
  account: { kind: string; asset: string; wallet_id: string | null; chain: string | null };
  amount: string;
}
interface Entry {
  id: string;
  kind: string;
  reference: string | null;
  description: string | null;
  metadata: Record<string, unknown>;
  created_at: string;
  postings: Posting[];
}

/** A signed decimal string back to minor units, refusing any other number of decimals than the asset's scale. */
function signedMinor(amount: string, asset: string): bigint {
  const scale = scaleOf(asset);
  const digits = amount.replace(/^-/, '');
  expect(digits.split('.')[1]?.length ?? 0, `${amount} has ${scale} decimals`).to.equal(scale);
  const minor = toMinor(digits, scale);
  return amount.startsWith('-') ? -minor : minor;
}

/** Created_at of entries, as stored (microseconds, UTC), by id. */
async function storedTimes(ids: string[]): Promise<Map<string, string>> {
  const rows: { id: string; t: string }[] = await (await getDs()).query(
    `SELECT id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS t FROM journal_entries WHERE id = ANY($1::uuid[])`,
    [ids],
  );
  return new Map(rows.map((r) => [r.id, r.t]));
}

/** ISO 8601 with milliseconds, as the API renders a stored time. */
const toMs = (stored: string) => new Date(stored).toISOString();

describe('treasury: balance and ledger', function () {
  this.timeout(30_000);
  let api: ApiHarness;
  let validateBalance: (body: unknown) => void;
  let validateList: (body: unknown) => void;

  before(async () => {
    api = await startApi();
    const ajv = responseAjv((await api.http.get('/openapi.json')).body);
    const balanceFn = ajv.compile({ $ref: 'openapi.json#/components/schemas/TreasuryBalance' });
    const listFn = ajv.compile({ $ref: 'openapi.json#/components/schemas/LedgerEntryList' });
    validateBalance = (body) => void (balanceFn(body) || expect.fail(JSON.stringify(balanceFn.errors)));
    validateList = (body) => void (listFn(body) || expect.fail(JSON.stringify(listFn.errors)));
  });
  after(() => api?.close());

  const post = (scope: EventScope, entry: EntryInput) => inUnit(api.deps, (unit) => postEntry(unit.em, scope, entry));
  const sandboxScope = (biz: TestBusiness): EventScope => ({ businessId: biz.businessId, environment: 'sandbox' });

  async function getBalance(key: string) {
    const res = await api.http.get(BALANCE).set(bearer(key));
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    validateBalance(res.body);
    return res.body as { asset: string; available: string; pending: string; updated_at: string | null };
  }

  async function list(key: string, query = ''): Promise<{ data: Entry[]; has_more: boolean; next_cursor: string | null }> {
    const res = await api.http.get(`${LEDGER}${query}`).set(bearer(key));
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    validateList(res.body);
    return res.body;
  }

  const ids = (page: { data: Entry[] }) => page.data.map((e) => e.id);

  /** POST /sandbox/wallets/{id}/fund; the id of the sandbox_funding entry it posted. */
  async function fundWallet(key: string, walletId: string, amount: string): Promise<string> {
    const res = await api.http.post(`${BASE}/sandbox/wallets/${walletId}/fund`).set(writeHeaders(key)).send({ chain: 'base', amount });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body.id;
  }

  describe('GET /treasury/balance', () => {
    it('is zero on both sides, never updated, for a fresh business', async () => {
      const biz = await makeBusiness();
      expect(await getBalance(biz.sandboxKey)).to.deep.equal({ asset: 'USDC', available: '0.000000', pending: '0.000000', updated_at: null });
    });

    it('reads the treasury and its pending side (summed over stripes), and when either last moved', async () => {
      const biz = await makeBusiness();
      const scope = sandboxScope(biz);
      // Three payments seen, each in its own transaction: they land in different stripes of the pending account.
      const seen = [];
      for (const amount of [1_000_001n, 2_500_000n, 9n]) {
        seen.push((await post(scope, { kind: 'test_payment_seen', postings: [{ account: INBOUND, amount: -amount }, { account: PENDING, amount }] })).id);
      }
      const stripes: { n: number }[] = await (await getDs()).query(
        `SELECT count(*)::int AS n FROM ledger_balance_stripes s JOIN ledger_accounts a ON a.id = s.account_id
          WHERE a.business_id = $1 AND a.environment = 'sandbox' AND a.account_key = 'treasury_pending:USDC'`,
        [biz.businessId],
      );
      expect(stripes[0].n, 'the pending balance is spread over several stripes').to.be.greaterThan(1);
      const times = await storedTimes(seen);
      let balance = await getBalance(biz.sandboxKey);
      expect(balance).to.deep.equal({ asset: 'USDC', available: '0.000000', pending: '3.500010', updated_at: toMs(times.get(seen[2])!) });

      // Confirmed: part of the pending side moves to the available treasury.
      const deposit = await post(scope, { kind: 'treasury_deposit', postings: [{ account: PENDING, amount: -3_000_000n }, { account: TREASURY, amount: 3_000_000n }] });
      const depositTime = toMs((await storedTimes([deposit.id])).get(deposit.id)!);
      balance = await getBalance(biz.sandboxKey);
      expect(balance).to.deep.equal({ asset: 'USDC', available: '3.000000', pending: '0.500010', updated_at: depositTime });

      // Entries that touch neither USDC account (a wallet's funding, the treasury in another asset) change nothing here.
      const customer = await createCustomer(api, biz.sandboxKey);
      await fundWallet(biz.sandboxKey, customer.wallet.id, '7');
      await post(scope, { kind: 'test_kes', postings: [{ account: { kind: 'inbound_clearing', asset: 'KES' }, amount: -500n }, { account: { kind: 'treasury', asset: 'KES' }, amount: 500n }] });
      expect(await getBalance(biz.sandboxKey)).to.deep.equal(balance);

      // The live books of the same business are another set of accounts.
      expect(await getBalance(biz.liveKey)).to.deep.equal({ asset: 'USDC', available: '0.000000', pending: '0.000000', updated_at: null });
    });
  });

  describe('GET /treasury/ledger', () => {
    let biz: TestBusiness;
    let walletId: string;
    let fund1: string;
    let fund2: string;
    let seenId: string;
    let depositId: string;
    let batch: string[];
    let multiId: string;
    /** Every entry of the business, newest first, worked out from the order they were posted in. */
    let expected: string[];
    let stored: Map<string, string>;

    before(async () => {
      biz = await makeBusiness();
      const scope = sandboxScope(biz);
      walletId = (await createCustomer(api, biz.sandboxKey)).wallet.id;
      fund1 = await fundWallet(biz.sandboxKey, walletId, '10');
      fund2 = await fundWallet(biz.sandboxKey, walletId, '2.5');
      seenId = (await post(scope, {
        kind: 'test_payment_seen', reference: `seen-${randomUUID()}`, postings: [{ account: INBOUND, amount: -3_000_000n }, { account: PENDING, amount: 3_000_000n }],
      })).id;
      depositId = (await post(scope, {
        kind: 'treasury_deposit',
        reference: `deposit-${randomUUID()}`,
        description: 'Deposit of 3 USDC confirmed',
        metadata: { intent: 'pi_test', confirmations: 12 },
        postings: [{ account: PENDING, amount: -3_000_000n }, { account: TREASURY, amount: 3_000_000n }],
      })).id;
      // Three entries in one transaction share created_at: the list orders them by id, newest first.
      batch = await inUnit(api.deps, async (unit) => {
        const out: string[] = [];
        for (let i = 0; i < 3; i++) {
          out.push((await postEntry(unit.em, scope, { kind: 'test_batch', postings: [{ account: TREASURY, amount: -1n }, { account: INBOUND, amount: 1n }] })).id);
        }
        return out;
      });
      multiId = (await post(scope, {
        kind: 'test_multi_asset',
        postings: [
          { account: { kind: 'inbound_clearing', asset: 'KES' }, amount: -12_950n },
          { account: { kind: 'treasury', asset: 'KES' }, amount: 12_950n },
          { account: INBOUND, amount: -1_000_000n },
          { account: PENDING, amount: 1_000_000n },
        ],
      })).id;
      expected = [multiId, ...[...batch].sort().reverse(), depositId, seenId, fund2, fund1];
      stored = await storedTimes(expected);
      expect(new Set(stored.values()).size, 'one created_at per transaction').to.equal(expected.length - 2);
    });

    it('lists every entry of the business, newest first, each with its postings summing to zero per asset', async () => {
      const page = await list(biz.sandboxKey, '?limit=100');
      expect(ids(page)).to.deep.equal(expected);
      expect(page).to.include({ has_more: false, next_cursor: null });
      for (const entry of page.data) {
        expect(entry.created_at, entry.id).to.equal(toMs(stored.get(entry.id)!));
        expect(entry.postings.length, entry.kind).to.be.at.least(2);
        const sums = new Map<string, bigint>();
        for (const p of entry.postings) sums.set(p.account.asset, (sums.get(p.account.asset) ?? 0n) + signedMinor(p.amount, p.account.asset));
        for (const [asset, sum] of sums) expect(sum, `${entry.kind} ${asset}`).to.equal(0n);
      }
      // Without a limit: the default page of 25 holds them all.
      expect(ids(await list(biz.sandboxKey))).to.deep.equal(expected);
    });

    it('renders each entry and its postings in full, in the order they were posted', async () => {
      const byId = new Map((await list(biz.sandboxKey, '?limit=100')).data.map((e) => [e.id, e]));
      const deposit = byId.get(depositId)!;
      expect(deposit.reference).to.match(/^deposit-/);
      expect(deposit).to.deep.equal({
        id: depositId,
        kind: 'treasury_deposit',
        reference: deposit.reference,
        description: 'Deposit of 3 USDC confirmed',
        metadata: { intent: 'pi_test', confirmations: 12 },
        created_at: toMs(stored.get(depositId)!),
        postings: [
          { account: { kind: 'treasury_pending', asset: 'USDC', wallet_id: null, chain: null }, amount: '-3.000000' },
          { account: { kind: 'treasury', asset: 'USDC', wallet_id: null, chain: null }, amount: '3.000000' },
        ],
      });
      expect(byId.get(seenId)).to.deep.include({ description: null, metadata: {} });
      const funding = byId.get(fund2)!;
      expect(funding).to.deep.include({ kind: 'sandbox_funding', reference: null });
      expect(funding.postings).to.deep.equal([
        { account: { kind: 'sandbox_faucet', asset: 'USDC', wallet_id: null, chain: null }, amount: '-2.500000' },
        { account: { kind: 'wallet', asset: 'USDC', wallet_id: walletId, chain: 'base' }, amount: '2.500000' },
      ]);
      // Each asset at its own scale: KES has 2 decimals.
      expect(byId.get(multiId)!.postings).to.deep.equal([
        { account: { kind: 'inbound_clearing', asset: 'KES', wallet_id: null, chain: null }, amount: '-129.50' },
        { account: { kind: 'treasury', asset: 'KES', wallet_id: null, chain: null }, amount: '129.50' },
        { account: { kind: 'inbound_clearing', asset: 'USDC', wallet_id: null, chain: null }, amount: '-1.000000' },
        { account: { kind: 'treasury_pending', asset: 'USDC', wallet_id: null, chain: null }, amount: '1.000000' },
      ]);
      expect(byId.get(batch[0])!.postings.map((p) => p.amount)).to.deep.equal(['-0.000001', '0.000001']);
    });

    it('pages through every entry without duplicates or gaps, across entries that share created_at', async () => {
      for (const limit of [1, 2, 3]) {
        const seen: string[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const page = await list(biz.sandboxKey, `?limit=${limit}${cursor ? `&starting_after=${encodeURIComponent(cursor)}` : ''}`);
          pages++;
          expect(page.data.length, `page ${pages} at limit ${limit}`).to.be.at.most(limit);
          const last = seen.length + page.data.length === expected.length;
          expect(page.has_more, `has_more of page ${pages} at limit ${limit}`).to.equal(!last);
          expect(page.next_cursor === null).to.equal(last);
          seen.push(...ids(page));
          cursor = page.next_cursor;
          expect(pages, 'pages').to.be.at.most(expected.length);
        } while (cursor);
        expect(seen, `limit ${limit}`).to.deep.equal(expected);
        expect(pages).to.equal(Math.ceil(expected.length / limit));
      }
    });

    it('filters by kind, with pagination', async () => {
      expect(ids(await list(biz.sandboxKey, '?kind=sandbox_funding'))).to.deep.equal([fund2, fund1]);
      expect(ids(await list(biz.sandboxKey, '?kind=treasury_deposit'))).to.deep.equal([depositId]);
      const first = await list(biz.sandboxKey, '?kind=test_batch&limit=2');
      expect(ids(first)).to.deep.equal(expected.slice(1, 3));
      expect(first.has_more).to.equal(true);
      const second = await list(biz.sandboxKey, `?kind=test_batch&limit=2&starting_after=${encodeURIComponent(first.next_cursor!)}`);
      expect(ids(second)).to.deep.equal(expected.slice(3, 4));
      expect(second).to.include({ has_more: false, next_cursor: null });
      expect(await list(biz.sandboxKey, '?kind=no_such_kind')).to.deep.equal({ data: [], has_more: false, next_cursor: null });
    });

    it('filters by created_gte and created_lte, both inclusive', async () => {
      const at = (id: string) => encodeURIComponent(stored.get(id)!);
      const from = (id: string) => expected.slice(0, expected.indexOf(id) + 1);
      const upTo = (id: string) => expected.slice(expected.indexOf(id));
      expect(ids(await list(biz.sandboxKey, `?created_gte=${at(depositId)}`))).to.deep.equal(from(depositId));
      expect(ids(await list(biz.sandboxKey, `?created_lte=${at(depositId)}`))).to.deep.equal(upTo(depositId));
      expect(ids(await list(biz.sandboxKey, `?created_gte=${at(fund2)}&created_lte=${at(depositId)}`))).to.deep.equal([depositId, seenId, fund2]);
      // The batch shares one instant: all three, or none.
      expect(ids(await list(biz.sandboxKey, `?created_gte=${at(batch[0])}&created_lte=${at(batch[0])}`))).to.deep.equal(expected.slice(1, 4));
      expect(ids(await list(biz.sandboxKey, `?kind=sandbox_funding&created_gte=${at(fund2)}`))).to.deep.equal([fund2]);
      const future = encodeURIComponent(new Date(Date.now() + 60_000).toISOString());
      expect(ids(await list(biz.sandboxKey, `?created_gte=${future}`))).to.deep.equal([]);
    });

    it('answers 400 invalid_request for a bad limit, cursor, date or kind', async () => {
      const forged = Buffer.from(JSON.stringify({ t: '2026-02-30T10:00:00.000000Z', i: randomUUID() })).toString('base64url');
      const cases: [string, string][] = [
        ['limit=0', 'limit'], ['limit=101', 'limit'], ['limit=abc', 'limit'], ['limit=2.5', 'limit'],
        ['starting_after=not-a-cursor', 'starting_after'], [`starting_after=${forged}`, 'starting_after'],
        ['created_gte=yesterday', 'created_gte'], ['created_lte=2026-01-01', 'created_lte'], ['kind=', 'kind'],
      ];
      for (const [query, param] of cases) {
        const res = await api.http.get(`${LEDGER}?${query}`).set(bearer(biz.sandboxKey));
        expect(res.status, query).to.equal(400);
        expect(res.body.error.code, query).to.equal('invalid_request');
        expect(res.body.error.details.map((d: { path: string; in: string }) => `${d.in}:${d.path}`), query).to.include(`query:${param}`);
      }
    });

    it('another business, and the live books of this one, never see these entries', async () => {
      const other = await makeBusiness();
      await fundWallet(other.sandboxKey, (await createCustomer(api, other.sandboxKey)).wallet.id, '1');
      const theirs = await list(other.sandboxKey, '?limit=100');
      expect(theirs.data.map((e) => e.kind)).to.deep.equal(['sandbox_funding']);
      expect(ids(theirs).filter((id) => expected.includes(id))).to.deep.equal([]);
      // A cursor from this business's list reads nothing of it elsewhere (the other's one entry is newer than it).
      const first = await list(biz.sandboxKey, '?limit=1');
      expect(ids(await list(other.sandboxKey, `?starting_after=${encodeURIComponent(first.next_cursor!)}`))).to.deep.equal([]);
      expect(await list(biz.liveKey)).to.deep.equal({ data: [], has_more: false, next_cursor: null });
      expect((await getBalance(other.sandboxKey)).available).to.equal('0.000000');
    });
  });

  it('both endpoints need treasury:read', async () => {
    const biz = await makeBusiness();
    const without = await makeKey(biz.businessId, { scopes: ['transactions:read', 'wallets:read', 'payment_intents:read'] });
    const only = await makeKey(biz.businessId, { scopes: ['treasury:read'] });
    const doc = (await api.http.get('/openapi.json')).body;
    for (const [path, operationId] of [[BALANCE, 'getTreasuryBalance'], [LEDGER, 'listTreasuryLedger']]) {
      const denied = await api.http.get(path).set(bearer(without.key));
      expect(denied.status, path).to.equal(403);
      expect(denied.body.error).to.include({ code: 'insufficient_scope' });
      expect(denied.body.error.details).to.deep.equal({ required_scope: 'treasury:read' });
      expect((await api.http.get(path).set(bearer(only.key))).status, path).to.equal(200);
      const op = doc.paths[path].get;
      expect(op).to.include({ operationId, 'x-required-scope': 'treasury:read' });
      expect(op.tags).to.deep.equal(['Treasury']);
    }
    expect(doc.paths[LEDGER].get.description).to.match(/sum to zero per asset/);
  });
});
