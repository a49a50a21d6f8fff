import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE, createCustomer } from '../helpers/wallets.js';
import { accountBalance, accountKey, findLedgerInconsistencies, InsufficientFundsError, LedgerError, postEntry, type LedgerAccount } from '../../shared/domain/ledger.js';
import type { EventScope } from '../../shared/domain/events.js';
import { createCustomer as createCustomerRow } from '../../shared/domain/customers.js';
import { getConfig } from '../../shared/config.js';

const TREASURY: LedgerAccount = { kind: 'treasury', asset: 'USDC' };
const FAUCET: LedgerAccount = { kind: 'sandbox_faucet', asset: 'USDC' };
const FEES: LedgerAccount = { kind: 'platform_fees', asset: 'USDC' };
const PROVIDER: LedgerAccount = { kind: 'provider_clearing', asset: 'USDC' };
const SETTLEMENT: LedgerAccount = { kind: 'settlement_clearing', asset: 'USDC' };

/** The stored balance and version of each of the scope's accounts, beside the sum and count of its postings. */
// A striped account's stored balance is the sum of its stripes (migrations/1763800011000-ledger-balance-stripes.ts).
const STORED_BALANCE = `(CASE WHEN a.striped THEN (SELECT coalesce(sum(s.balance), 0) FROM ledger_balance_stripes s WHERE s.account_id = a.id) ELSE a.balance END)::text`;
const STORED_VERSION = `(CASE WHEN a.striped THEN (SELECT coalesce(sum(s.version), 0) FROM ledger_balance_stripes s WHERE s.account_id = a.id) ELSE a.version END)::text`;

async function storedVsPosted(ds: DataSource, scope: EventScope): Promise<{ account_key: string; balance: string; version: string; posted: string; postings: string }[]> {
  return ds.query(
    `SELECT a.account_key, ${STORED_BALANCE} AS balance, ${STORED_VERSION} AS version,
            (SELECT coalesce(sum(amount), 0)::text FROM ledger_postings p WHERE p.account_id = a.id) AS posted,
            (SELECT count(*)::text FROM ledger_postings p WHERE p.account_id = a.id) AS postings
       FROM ledger_accounts a WHERE a.business_id = $1 AND a.environment = $2 ORDER BY a.account_key`,
    [scope.businessId, scope.environment],
  );
}

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

    it('refuses a balance or version changed without a posting, and an account created with one', async () => {
      const before: { balance: string; version: string }[] = await ds.query(`SELECT balance::text, version::text FROM ledger_accounts WHERE id = $1`, [accounts.treasury]);
      await expectRejected(ds.query(`UPDATE ledger_accounts SET balance = balance + 1000 WHERE id = $1`, [accounts.treasury]), /changes only through postings/);
      await expectRejected(ds.query(`UPDATE ledger_accounts SET version = version + 1 WHERE id = $1`, [accounts.treasury]), /changes only through postings/);
      // Even a change dressed up as one posting's worth is refused outside the posting trigger.
      await expectRejected(ds.query(`UPDATE ledger_accounts SET balance = balance + 1, version = version + 1 WHERE id = $1`, [accounts.treasury]), /changes only through postings/);
      await expectRejected(
        ds.transaction(async (em) => {
          await em.query(`UPDATE ledger_accounts SET balance = balance - 5 WHERE id = $1`, [accounts.treasury]);
          await em.query(`UPDATE ledger_accounts SET balance = balance + 5 WHERE id = $1`, [accounts.faucet]);
        }),
        /changes only through postings/,
      );
      await expectRejected(
        ds.query(`INSERT INTO ledger_accounts (business_id, environment, account_key, kind, asset, balance) VALUES ($1, 'sandbox', 'treasury:EUR', 'treasury', 'EUR', 500)`, [scope.businessId]),
        /must start at balance 0/,
      );
      await expectRejected(ds.query(`TRUNCATE ledger_accounts CASCADE`), /append-only/);
      expect(await ds.query(`SELECT balance::text, version::text FROM ledger_accounts WHERE id = $1`, [accounts.treasury])).to.deep.equal(before);
    });

    it('moves the stored balance for postings written by raw SQL too', async () => {
      const before = await accountBalance(ds, scope, TREASURY);
      await insertEntry([[accounts.treasury, 'USDC', 9n], [accounts.faucet, 'USDC', -9n]]);
      expect(await accountBalance(ds, scope, TREASURY)).to.equal(before + 9n);
      for (const row of await storedVsPosted(ds, scope)) expect(row.balance, row.account_key).to.equal(row.posted);
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

  /** postEntry in a transaction of its own, with the statements it sent counted. */
  const postCounted = async (local: EventScope, input: Parameters<typeof postEntry>[2]) => {
    let statements = 0;
    const posted = await ds.transaction((em) => {
      const counting = new Proxy(em, { get: (target, name, receiver) => (name === 'query' ? (...args: unknown[]) => {
        statements++;
        return (target.query as (...a: unknown[]) => unknown).apply(target, args);
      } : Reflect.get(target, name, receiver)) });
      return postEntry(counting, local, input);
    });
    return { ...posted, statements };
  };

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

  it('a guarded debit is locked, checked and written in one statement; its repeat answers the entry though the balance no longer covers it', async () => {
    const local: EventScope = { businessId: (await makeBusiness()).businessId, environment: 'sandbox' };
    // The first post creates the accounts; the second finds them (from then on this process knows they exist).
    for (const n of [60n, 40n]) await ds.transaction((em) => postEntry(em, local, { kind: 'seed', postings: [{ account: FAUCET, amount: -n - 1n }, { account: TREASURY, amount: n }, { account: FEES, amount: 1n }] }));
    const spend = (amount: bigint) => [{ account: TREASURY, amount: -amount, noOverdraft: true }, { account: TREASURY, amount: 1n }, { account: FEES, amount: amount - 1n }];
    const counted = (reference: string, amount: bigint) => postCounted(local, { kind: 'spend', reference, postings: spend(amount) });
    const reference = `guarded-${randomUUID()}`;
    const first = await counted(reference, 71n);
    expect([first.created, first.statements]).to.deep.equal([true, 1]);
    // 30 left: the same entry again answers the first, unchecked and unwritten.
    const again = await counted(reference, 71n);
    expect([again.created, again.id, again.statements]).to.deep.equal([false, first.id, 1]);
    // Net of the whole entry (71 out, 1 back): 70 asked of 30.
    const refused = await counted(`guarded-${randomUUID()}`, 71n).catch((err: unknown) => err);
    expect(refused).to.be.instanceOf(InsufficientFundsError);
    expect((refused as Error).message).to.match(/30/).and.match(/70/);
    expect(await accountBalance(ds, local, TREASURY)).to.equal(30n);
    for (const row of await storedVsPosted(ds, local)) expect(row.balance, row.account_key).to.equal(row.posted);
  });

  describe('striped balances of the shared clearing, fee and faucet accounts', () => {
    it('take 80 concurrent postings without a lock queue, a lost update or a deadlock, and sum to their postings', async () => {
      const local: EventScope = { businessId: (await makeBusiness()).businessId, environment: 'sandbox' };
      const SETTLEMENT: LedgerAccount = { kind: 'settlement_clearing', asset: 'USDC' };
      const outcomes = await Promise.allSettled(
        Array.from({ length: 80 }, (_, i) => ds.transaction((em) => postEntry(em, local, { kind: 'deposit', postings: [{ account: FAUCET, amount: -BigInt(i + 1) }, { account: SETTLEMENT, amount: BigInt(i + 1) }] }))),
      );
      expect(outcomes.filter((o) => o.status === 'rejected')).to.deep.equal([]);
      const total = BigInt((80 * 81) / 2);
      expect(await accountBalance(ds, local, SETTLEMENT)).to.equal(total);
      expect(await accountBalance(ds, local, FAUCET)).to.equal(-total);
      for (const row of await storedVsPosted(ds, local)) {
        expect(row.balance, row.account_key).to.equal(row.posted);
        expect(row.version, row.account_key).to.equal(row.postings);
      }
      const [{ stripes }] = await ds.query(
        `SELECT count(*)::int AS stripes FROM ledger_balance_stripes s JOIN ledger_accounts a ON a.id = s.account_id WHERE a.business_id = $1 AND a.kind = 'settlement_clearing'`,
        [local.businessId],
      );
      expect(stripes, 'spread over stripes').to.be.greaterThan(1);
    });

    it('an entry of striped accounts alone, each known to exist, is one statement; its reference posts it once', async () => {
      const local: EventScope = { businessId: (await makeBusiness()).businessId, environment: 'sandbox' };
      const postings = (n: bigint) => [{ account: FAUCET, amount: -n }, { account: SETTLEMENT, amount: n - 2n }, { account: PROVIDER, amount: 1n }, { account: FEES, amount: 1n }];
      // The first post creates the accounts; the second finds them (from then on this process knows they exist).
      for (const n of [10n, 20n]) await ds.transaction((em) => postEntry(em, local, { kind: 'seed', postings: postings(n) }));
      const counted = (reference: string) => postCounted(local, { kind: 'payout', reference, postings: postings(30n) });
      const reference = `striped-${randomUUID()}`;
      const first = await counted(reference);
      expect([first.created, first.statements]).to.deep.equal([true, 1]);
      const again = await counted(reference);
      expect([again.created, again.id]).to.deep.equal([false, first.id]);
      expect(await accountBalance(ds, local, SETTLEMENT)).to.equal(8n + 18n + 28n);
      expect(await accountBalance(ds, local, FEES)).to.equal(3n);
      for (const row of await storedVsPosted(ds, local)) expect(row.balance, row.account_key).to.equal(row.posted);
      const [{ n }] = await ds.query(`SELECT count(*)::int AS n FROM ledger_postings p JOIN journal_entries e ON e.id = p.entry_id WHERE e.reference = $1`, [reference]);
      expect(n).to.equal(4);
    });

    it('refuse direct changes and an overdraft guard', async () => {
      const local: EventScope = { businessId: (await makeBusiness()).businessId, environment: 'sandbox' };
      await ds.transaction((em) => postEntry(em, local, { kind: 'seed', postings: [{ account: FAUCET, amount: -5n }, { account: TREASURY, amount: 5n }] }));
      const stripeOf = `(SELECT id FROM ledger_accounts WHERE business_id = '${local.businessId}' AND kind = 'sandbox_faucet')`;
      await expectRejected(ds.query(`UPDATE ledger_balance_stripes SET balance = 0 WHERE account_id = ${stripeOf}`), /only through postings/);
      await expectRejected(ds.query(`DELETE FROM ledger_balance_stripes WHERE account_id = ${stripeOf}`), /only through postings/);
      await expectRejected(
        ds.transaction((em) => postEntry(em, local, { kind: 'x', postings: [{ account: FAUCET, amount: -1n, noOverdraft: true }, { account: TREASURY, amount: 1n }] })),
        /striped/,
      );
    });
  });

  describe('stored, versioned balances', () => {
    const version = async (local: EventScope, account: LedgerAccount): Promise<bigint> => {
      const rows: { version: string }[] = await ds.query(
        `SELECT ${STORED_VERSION} AS version FROM ledger_accounts a WHERE business_id = $1 AND environment = $2 AND account_key = $3`,
        [local.businessId, local.environment, accountKey(account)],
      );
      return rows[0] ? BigInt(rows[0].version) : 0n;
    };
    const newScope = async (): Promise<EventScope> => ({ businessId: (await makeBusiness()).businessId, environment: 'sandbox' });
    const debit = (local: EventScope, from: LedgerAccount, to: LedgerAccount, amount: bigint) =>
      ds.transaction((em) => postEntry(em, local, { kind: 'spend', postings: [{ account: from, amount: -amount, noOverdraft: true }, { account: to, amount }] })).then(
        () => 'posted' as const,
        (err: unknown) => err,
      );

    it('keeps the stored balance equal to the sum of postings after many postings', async () => {
      const local = await newScope();
      const accounts = [FAUCET, TREASURY, FEES, PROVIDER, SETTLEMENT];
      const expected = new Map<string, bigint>();
      let seed = 7;
      const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648);
      for (let tx = 0; tx < 40; tx++) {
        await ds.transaction(async (em) => {
          for (let e = 0; e < 5; e++) {
            const from = accounts[next() % accounts.length];
            const to = accounts.filter((a) => a !== from)[next() % (accounts.length - 1)];
            const amount = BigInt(1 + (next() % 1_000_000)) * 10n ** BigInt(next() % 20);
            await postEntry(em, local, { kind: 'shuffle', postings: [{ account: from, amount: -amount }, { account: to, amount }] });
            expected.set(from.kind, (expected.get(from.kind) ?? 0n) - amount);
            expected.set(to.kind, (expected.get(to.kind) ?? 0n) + amount);
          }
        });
      }
      for (const account of accounts) expect(await accountBalance(ds, local, account), account.kind).to.equal(expected.get(account.kind) ?? 0n);
      const rows = await storedVsPosted(ds, local);
      expect(rows).to.have.length(accounts.length);
      for (const row of rows) {
        expect(row.balance, row.account_key).to.equal(row.posted);
        expect(row.version, row.account_key).to.equal(row.postings);
      }
      expect(rows.reduce((sum, r) => sum + BigInt(r.balance), 0n)).to.equal(0n);
    });

    it('increments the version once per posting, and not for a refused or replayed entry', async () => {
      const local = await newScope();
      const post = (postings: { account: LedgerAccount; amount: bigint; noOverdraft?: boolean }[], reference?: string) =>
        ds.transaction((em) => postEntry(em, local, { kind: 'versioned', reference, postings }));
      await post([{ account: FAUCET, amount: -10n }, { account: TREASURY, amount: 10n }], `v-${local.businessId}`);
      expect(await version(local, TREASURY)).to.equal(1n);
      await post([{ account: FAUCET, amount: -7n }, { account: TREASURY, amount: 3n }, { account: TREASURY, amount: 4n }]);
      expect(await version(local, TREASURY)).to.equal(3n);
      expect(await version(local, FAUCET)).to.equal(2n);
      await post([{ account: FAUCET, amount: -10n }, { account: TREASURY, amount: 10n }], `v-${local.businessId}`);
      await expectRejected(post([{ account: TREASURY, amount: -18n, noOverdraft: true }, { account: FEES, amount: 18n }]), /insufficient funds/);
      // Two debits of one account in one entry are checked together against its balance.
      await expectRejected(post([{ account: TREASURY, amount: -10n, noOverdraft: true }, { account: TREASURY, amount: -10n, noOverdraft: true }, { account: FEES, amount: 20n }]), /insufficient funds/);
      expect(await version(local, TREASURY)).to.equal(3n);
      expect(await version(local, FEES)).to.equal(0n);
      expect(await accountBalance(ds, local, TREASURY)).to.equal(17n);
    });

    it('lets exactly the affordable share of 60 concurrent debits through, without deadlocks', async () => {
      const local = await newScope();
      await ds.transaction((em) => postEntry(em, local, { kind: 'seed', postings: [{ account: FAUCET, amount: -250n }, { account: TREASURY, amount: 250n }] }));
      // Destinations whose ids sort on either side of the debited account's.
      const destinations = [FEES, PROVIDER, SETTLEMENT, FAUCET];
      const outcomes = await Promise.all(Array.from({ length: 60 }, (_, i) => debit(local, TREASURY, destinations[i % destinations.length], 7n)));
      const refused = outcomes.filter((o) => o !== 'posted');
      for (const err of refused) expect(err).to.be.instanceOf(InsufficientFundsError);
      expect(outcomes.filter((o) => o === 'posted')).to.have.length(35);
      expect(await accountBalance(ds, local, TREASURY)).to.equal(5n);
      expect(await version(local, TREASURY)).to.equal(36n);
      for (const row of await storedVsPosted(ds, local)) expect(row.balance, row.account_key).to.equal(row.posted);
    });

    it('never deadlocks or overdraws when guarded accounts pay each other concurrently', async () => {
      const local = await newScope();
      // Two single-row (guarded) accounts: the treasury and a managed wallet.
      const { customer } = await ds.transaction((em) => createCustomerRow(em, getConfig().wallets, local, { external_reference: `ledger-${randomUUID()}` }));
      const WALLET: LedgerAccount = { kind: 'wallet', walletId: customer.wallet_id, chain: 'base', asset: 'USDC' };
      await ds.transaction((em) =>
        postEntry(em, local, { kind: 'seed', postings: [{ account: FAUCET, amount: -200n }, { account: TREASURY, amount: 100n }, { account: WALLET, amount: 100n }] }),
      );
      const outcomes = await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 ? debit(local, TREASURY, WALLET, 30n) : debit(local, WALLET, TREASURY, 30n))));
      for (const o of outcomes.filter((x) => x !== 'posted')) expect(o).to.be.instanceOf(InsufficientFundsError);
      const treasury = await accountBalance(ds, local, TREASURY);
      const fees = await accountBalance(ds, local, WALLET);
      expect(treasury + fees).to.equal(200n);
      expect(treasury >= 0n && fees >= 0n, `${treasury} / ${fees}`).to.equal(true);
      for (const row of await storedVsPosted(ds, local)) expect(row.version, row.account_key).to.equal(row.postings);
    });

    it('the consistency check reports drift the database would otherwise refuse (rolled back)', async function () {
      const local = await newScope();
      await ds.transaction((em) => postEntry(em, local, { kind: 'seed', postings: [{ account: FAUCET, amount: -5n }, { account: TREASURY, amount: 5n }] }));
      const [treasury]: { id: string }[] = await ds.query(`SELECT id FROM ledger_accounts WHERE business_id = $1 AND account_key = 'treasury:USDC'`, [local.businessId]);
      const rollback = new Error('rollback');
      let found: Awaited<ReturnType<typeof findLedgerInconsistencies>> | undefined;
      const outcome = await ds
        .transaction(async (em) => {
          // Replica mode skips the ledger's triggers for this transaction only (it needs a superuser).
          await em.query(`SET LOCAL session_replication_role = replica`);
          await em.query(`UPDATE ledger_accounts SET balance = balance + 1 WHERE id = $1`, [treasury.id]);
          const entry: { id: string }[] = await em.query(`INSERT INTO journal_entries (business_id, environment, kind) VALUES ($1, 'sandbox', 'raw') RETURNING id`, [local.businessId]);
          await em.query(`INSERT INTO ledger_postings (entry_id, account_id, business_id, environment, asset, amount) VALUES ($1, $2, $3, 'sandbox', 'USDC', 2)`, [entry[0].id, treasury.id, local.businessId]);
          found = await findLedgerInconsistencies(em);
          throw rollback;
        })
        .catch((err: { code?: string }) => err);
      if ((outcome as { code?: string }).code === '42501') this.skip();
      expect(outcome).to.equal(rollback);
      expect(found!.driftedAccounts).to.deep.include({ account_id: treasury.id, account_key: 'treasury:USDC', balance: '6', posted: '7', version: '1', postings: '2' });
      expect(found!.unbalancedEntries.map((e) => e.total)).to.include('2');
      expect(await accountBalance(ds, local, TREASURY)).to.equal(5n);
    });
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

  describe('after the suite\'s work', () => {
    it('finds every entry balanced and every stored balance equal to its postings', async () => {
      expect(await findLedgerInconsistencies(ds)).to.deep.equal({ unbalancedEntries: [], driftedAccounts: [] });
    });
  });
});
