import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { accountBalance, InsufficientFundsError, LedgerError, postEntry, type LedgerAccount } from '../../shared/domain/ledger.js';
import type { EventScope } from '../../shared/domain/events.js';

const TREASURY: LedgerAccount = { kind: 'treasury', asset: 'USDC' };
const FAUCET: LedgerAccount = { kind: 'sandbox_faucet', asset: 'USDC' };

async function expectRejected(promise: Promise<unknown>, pattern: RegExp): Promise<void> {
  let error: unknown;
  await promise.catch((err: unknown) => {
    error = err;
  });
  expect(error, 'expected a rejection').to.be.instanceOf(Error);
  expect((error as Error).message).to.match(pattern);
}

describe('ledger', () => {
  let ds: DataSource;
  let scope: EventScope;
  before(async () => {
    ds = await getDs();
    scope = { businessId: (await makeBusiness()).businessId, environment: 'sandbox' };
  });

  const fundTreasury = (amount: bigint, reference?: string) =>
    ds.transaction((em) => postEntry(em, scope, { kind: 'test_funding', reference, postings: [{ account: FAUCET, amount: -amount }, { account: TREASURY, amount }] }));

  it('posts balanced entries and derives balances from them', async () => {
    const local: EventScope = { businessId: (await makeBusiness()).businessId, environment: 'sandbox' };
    await ds.transaction(async (em) => {
      await postEntry(em, local, {
        kind: 'multi_asset',
        postings: [
          { account: FAUCET, amount: -1_500_000n },
          { account: TREASURY, amount: 1_000_000n },
          { account: { kind: 'platform_fees', asset: 'USDC' }, amount: 500_000n },
          { account: { kind: 'provider_clearing', asset: 'KES' }, amount: -12_950n },
          { account: { kind: 'treasury', asset: 'KES' }, amount: 12_950n },
        ],
      });
    });
    expect(await accountBalance(ds, local, TREASURY)).to.equal(1_000_000n);
    expect(await accountBalance(ds, local, { kind: 'platform_fees', asset: 'USDC' })).to.equal(500_000n);
    expect(await accountBalance(ds, local, FAUCET)).to.equal(-1_500_000n);
    expect(await accountBalance(ds, local, { kind: 'treasury', asset: 'KES' })).to.equal(12_950n);
    // Another environment of the same business is another set of books.
    expect(await accountBalance(ds, { ...local, environment: 'live' }, TREASURY)).to.equal(0n);
  });

  it('refuses an unbalanced entry before touching the database', async () => {
    await expectRejected(
      ds.transaction((em) => postEntry(em, scope, { kind: 'bad', postings: [{ account: FAUCET, amount: -5n }, { account: TREASURY, amount: 4n }] })),
      /sum to -1/,
    );
    await expectRejected(ds.transaction((em) => postEntry(em, scope, { kind: 'bad', postings: [{ account: TREASURY, amount: 0n }, { account: FAUCET, amount: 0n }] })), /non-zero/);
    await expectRejected(ds.transaction((em) => postEntry(em, scope, { kind: 'bad', postings: [{ account: TREASURY, amount: 1n }] })), /two postings/);
    await expectRejected(postEntry(ds.manager, scope, { kind: 'bad', postings: [{ account: FAUCET, amount: -1n }, { account: TREASURY, amount: 1n }] }), /inside the transaction/);
  });

  describe('database invariants (direct SQL, bypassing postEntry)', () => {
    let accounts: { treasury: string; faucet: string };
    before(async () => {
      await fundTreasury(10n);
      const rows: { kind: string; id: string }[] = await ds.query(
        `SELECT kind, id FROM ledger_accounts WHERE business_id = $1 AND environment = 'sandbox' AND asset = 'USDC' AND kind IN ('treasury', 'sandbox_faucet')`,
        [scope.businessId],
      );
      accounts = { treasury: rows.find((r) => r.kind === 'treasury')!.id, faucet: rows.find((r) => r.kind === 'sandbox_faucet')!.id };
    });

    async function insertEntry(postings: [string, string, bigint][]): Promise<void> {
      await ds.transaction(async (em) => {
        const entry: { id: string }[] = await em.query(`INSERT INTO journal_entries (business_id, environment, kind) VALUES ($1, 'sandbox', 'raw') RETURNING id`, [scope.businessId]);
        for (const [account, asset, amount] of postings) {
          await em.query(
            `INSERT INTO ledger_postings (entry_id, account_id, business_id, environment, asset, amount) VALUES ($1, $2, $3, 'sandbox', $4, $5)`,
            [entry[0].id, account, scope.businessId, asset, amount.toString()],
          );
        }
      });
    }

    it('rejects at commit an entry whose postings do not sum to zero', async () => {
      const before = await accountBalance(ds, scope, TREASURY);
      await expectRejected(insertEntry([[accounts.treasury, 'USDC', 5n]]), /fewer than two postings/);
      await expectRejected(insertEntry([[accounts.treasury, 'USDC', 5n], [accounts.faucet, 'USDC', -4n]]), /does not balance/);
      await expectRejected(insertEntry([]), /fewer than two postings/);
      expect(await accountBalance(ds, scope, TREASURY)).to.equal(before);
    });

    it('rejects a later posting added to a committed entry, even a balanced pair', async () => {
      const { id } = await fundTreasury(3n);
      const add = (postings: [string, bigint][]) =>
        ds.transaction(async (em) => {
          for (const [account, amount] of postings) {
            await em.query(`INSERT INTO ledger_postings (entry_id, account_id, business_id, environment, asset, amount) VALUES ($1, $2, $3, 'sandbox', 'USDC', $4)`,
              [id, account, scope.businessId, amount.toString()]);
          }
        });
      const before = await accountBalance(ds, scope, TREASURY);
      await expectRejected(add([[accounts.treasury, 1n]]), /is closed/);
      await expectRejected(add([[accounts.treasury, 1_000_000n], [accounts.faucet, -1_000_000n]]), /is closed/);
      expect(await accountBalance(ds, scope, TREASURY)).to.equal(before);
    });

    it('ledger accounts cannot be re-pointed or removed', async () => {
      await expectRejected(ds.query(`UPDATE ledger_accounts SET account_key = 'x' WHERE id = $1`, [accounts.treasury]), /append-only/);
      await expectRejected(ds.query(`DELETE FROM ledger_accounts WHERE id = $1`, [accounts.treasury]), /append-only/);
    });

    it('keeps a posting in its account\'s asset and its entry\'s business', async () => {
      await expectRejected(insertEntry([[accounts.treasury, 'KES', 5n], [accounts.faucet, 'KES', -5n]]), /foreign key/);
      const other = await makeBusiness();
      await expectRejected(
        ds.transaction(async (em) => {
          const entry: { id: string }[] = await em.query(`INSERT INTO journal_entries (business_id, environment, kind) VALUES ($1, 'sandbox', 'raw') RETURNING id`, [other.businessId]);
          await em.query(
            `INSERT INTO ledger_postings (entry_id, account_id, business_id, environment, asset, amount) VALUES ($1, $2, $3, 'sandbox', 'USDC', 5), ($1, $4, $3, 'sandbox', 'USDC', -5)`,
            [entry[0].id, accounts.treasury, other.businessId, accounts.faucet],
          );
        }),
        /foreign key/,
      );
    });

    it('never lets entries or postings be updated or deleted', async () => {
      const { id } = await fundTreasury(1n);
      await expectRejected(ds.query(`UPDATE ledger_postings SET amount = amount * 2 WHERE entry_id = $1`, [id]), /append-only/);
      await expectRejected(ds.query(`DELETE FROM ledger_postings WHERE entry_id = $1`, [id]), /append-only/);
      await expectRejected(ds.query(`UPDATE journal_entries SET kind = 'x' WHERE id = $1`, [id]), /append-only/);
      await expectRejected(ds.query(`DELETE FROM journal_entries WHERE id = $1`, [id]), /append-only/);
      await expectRejected(ds.query(`TRUNCATE ledger_postings`), /append-only/);
    });
  });

  it('posts one entry per reference, even when posted concurrently', async () => {
    const local: EventScope = { businessId: (await makeBusiness()).businessId, environment: 'sandbox' };
    const reference = `ref-${randomUUID()}`;
    const results = await Promise.all(
      Array.from({ length: 10 }, () => ds.transaction((em) => postEntry(em, local, { kind: 'once', reference, postings: [{ account: FAUCET, amount: -7n }, { account: TREASURY, amount: 7n }] }))),
    );
    expect(new Set(results.map((r) => r.id)).size).to.equal(1);
    expect(results.filter((r) => r.created)).to.have.length(1);
    expect(await accountBalance(ds, local, TREASURY)).to.equal(7n);
  });

  it('serializes guarded debits so an account never goes below zero', async () => {
    const local: EventScope = { businessId: (await makeBusiness()).businessId, environment: 'sandbox' };
    await ds.transaction((em) => postEntry(em, local, { kind: 'seed', postings: [{ account: FAUCET, amount: -100n }, { account: TREASURY, amount: 100n }] }));
    const outcomes = await Promise.allSettled(
      Array.from({ length: 30 }, () =>
        ds.transaction((em) =>
          postEntry(em, local, { kind: 'spend', postings: [{ account: TREASURY, amount: -5n, noOverdraft: true }, { account: { kind: 'platform_fees', asset: 'USDC' }, amount: 5n }] }),
        ),
      ),
    );
    const refused = outcomes.filter((o) => o.status === 'rejected');
    expect(outcomes.filter((o) => o.status === 'fulfilled')).to.have.length(20);
    expect(refused).to.have.length(10);
    for (const r of refused) expect((r as PromiseRejectedResult).reason).to.be.instanceOf(InsufficientFundsError);
    expect(await accountBalance(ds, local, TREASURY)).to.equal(0n);
    expect(InsufficientFundsError.prototype).to.be.instanceOf(LedgerError);
  });

  describe('under concurrent sandbox funding over HTTP', () => {
    let api: ApiHarness;
    before(async () => {
      api = await startApi();
    });
    after(() => api.close());

    it('credits 50 concurrent fundings exactly, and the books still sum to zero', async () => {
      const biz = await makeBusiness();
      const customer = await createCustomer(api, biz.sandboxKey);
      const fund = () => api.http.post(`${BASE}/sandbox/wallets/${customer.wallet.id}/fund`).set(writeHeaders(biz.sandboxKey)).send({ chain: 'polygon', amount: '1.000001' });
      const results = await Promise.all(Array.from({ length: 50 }, fund));
      expect(results.map((r) => r.status)).to.deep.equal(Array(50).fill(200));
      const balance = await api.http.get(`${BASE}/wallets/${customer.wallet.id}/balance?chain=polygon`).set(bearer(biz.sandboxKey));
      expect(balance.body.available).to.equal('50.000050');
      const books: { asset: string; total: string; entries: number }[] = await ds.query(
        `SELECT asset, sum(amount)::text AS total, count(DISTINCT entry_id)::int AS entries FROM ledger_postings WHERE business_id = $1 GROUP BY asset`,
        [biz.businessId],
      );
      expect(books).to.deep.equal([{ asset: 'USDC', total: '0', entries: 50 }]);
    });
  });
});
