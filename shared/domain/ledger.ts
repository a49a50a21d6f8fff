import type { DataSource, EntityManager } from 'typeorm';
import type { Chain } from './chains.js';
import type { EventScope } from './events.js';
import { planOnce } from '../db/prepared-client.js';

// The double-entry ledger every balance is derived from. An entry's postings sum to zero per asset (checked here,
// and by a deferred constraint trigger at commit); entries and postings are append-only. Amounts are bigint minor
// units; a posting's sign is the direction of value: positive adds to the account's balance, negative takes from it.
// Each account stores its balance and version (its count of postings); a database trigger applies every posting to
// them, and nothing else may change them (migrations/1763800005000-ledger-stored-balances.ts).

/**
 * `treasury`: a business's available USDC (guarded: payouts spend it). `treasury_pending`: payments seen but not yet
 * confirmed. `inbound_clearing`: where payments to the business come from (a payer's mobile money converted, a
 * transfer to a deposit address).
 */
export type LedgerAccountKind =
  | 'wallet' | 'treasury' | 'treasury_pending' | 'inbound_clearing' | 'platform_fees' | 'provider_clearing' | 'settlement_clearing' | 'sandbox_faucet';

/**
 * Accounts nearly every transaction posts to, never guarded against overdraft: their balance is kept in stripes so
 * concurrent postings do not queue on one row (migrations/1763800011000-ledger-balance-stripes.ts).
 */
export const STRIPED_KINDS: ReadonlySet<LedgerAccountKind> = new Set([
  'settlement_clearing', 'provider_clearing', 'platform_fees', 'sandbox_faucet', 'treasury_pending', 'inbound_clearing',
]);

/** A ledger account, named by what it holds; it is created on first use. */
export type LedgerAccount =
  | { kind: 'wallet'; walletId: string; chain: Chain; asset: string }
  | { kind: Exclude<LedgerAccountKind, 'wallet'>; asset: string };

export interface PostingInput {
  account: LedgerAccount;
  amount: bigint;
  /** Refuse the entry (InsufficientFundsError) if it would take this account below zero. */
  noOverdraft?: boolean;
}

export interface EntryInput {
  /** What caused it: `sandbox_funding`, `offramp_settlement`, ... */
  kind: string;
  /** One entry per business fact: a second post with the same reference returns the first entry. */
  reference?: string;
  description?: string;
  metadata?: Record<string, unknown>;
  postings: PostingInput[];
}

export class LedgerError extends Error {}

export class InsufficientFundsError extends LedgerError {
  constructor(readonly account: LedgerAccount, readonly available: bigint, readonly required: bigint) {
    super(`insufficient funds in ${accountKey(account)}: ${available} available, ${required} required`);
  }
}

export function accountKey(account: LedgerAccount): string {
  return account.kind === 'wallet' ? `wallet:${account.walletId}:${account.chain}:${account.asset}` : `${account.kind}:${account.asset}`;
}

function assertBalanced(postings: PostingInput[]): void {
  if (postings.length < 2) throw new LedgerError('a journal entry needs at least two postings');
  const sums = new Map<string, bigint>();
  for (const p of postings) {
    if (typeof p.amount !== 'bigint' || p.amount === 0n) throw new LedgerError('posting amounts are non-zero bigints');
    sums.set(p.account.asset, (sums.get(p.account.asset) ?? 0n) + p.amount);
  }
  for (const [asset, sum] of sums) if (sum !== 0n) throw new LedgerError(`postings in ${asset} sum to ${sum}, not zero`);
}

function assertInTransaction(em: EntityManager): void {
  // Outside a transaction each statement commits alone, and the deferred balance check would reject the entry row.
  if (!em.queryRunner?.isTransactionActive) throw new LedgerError('postEntry must run inside the transaction of the state change');
}

/** The account's id, creating the account on first use (sorted callers avoid lock-order deadlocks). */
export async function ensureAccount(em: EntityManager, scope: EventScope, account: LedgerAccount): Promise<string> {
  const key = accountKey(account);
  const params = [scope.businessId, scope.environment, key];
  const found: { id: string }[] = await em.query(`SELECT id FROM ledger_accounts WHERE business_id = $1 AND environment = $2 AND account_key = $3`, params);
  if (found[0]) return found[0].id;
  const wallet = account.kind === 'wallet' ? account : null;
  const created: { account_key: string }[] = await em.query(
    `INSERT INTO ledger_accounts (business_id, environment, account_key, kind, asset, wallet_id, chain) VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (business_id, environment, account_key) DO NOTHING`,
    [...params, account.kind, account.asset, wallet?.walletId ?? null, wallet?.chain ?? null],
  );
  const rows: { id: string }[] = await em.query(`SELECT id FROM ledger_accounts WHERE business_id = $1 AND environment = $2 AND account_key = $3`, params);
  return rows[0].id;
}


/** Accounts this process has seen exist (they are never deleted), so a post skips creating them. */
const KNOWN_ACCOUNTS = new Set<string>();
const knownKey = (scope: EventScope, account: LedgerAccount) => `${scope.businessId}|${scope.environment}|${accountKey(account)}`;

/** Creates the accounts that do not exist yet, in key order (one statement; existing rows are left alone, unlocked). */
async function createAccounts(em: EntityManager, scope: EventScope, accounts: LedgerAccount[]): Promise<Set<string>> {
  const unique = [...new Map(accounts.map((a) => [accountKey(a), a])).values()].sort((a, b) => accountKey(a).localeCompare(accountKey(b)));
  const wallet = (a: LedgerAccount) => (a.kind === 'wallet' ? a : null);
  const created: { account_key: string }[] = await em.query(
    `INSERT INTO ledger_accounts (business_id, environment, account_key, kind, asset, wallet_id, chain, striped)
     SELECT $1, $2, k, kind, asset, wallet_id, chain, kind = ANY($8::text[])
       FROM unnest($3::text[], $4::text[], $5::text[], $6::uuid[], $7::text[]) WITH ORDINALITY AS a(k, kind, asset, wallet_id, chain, n)
      -- Existing accounts are skipped before the insert: a conflict check on a row another transaction is updating
      -- would wait for it while this one may already hold a row that other needs.
      WHERE NOT EXISTS (SELECT 1 FROM ledger_accounts x WHERE x.business_id = $1 AND x.environment = $2 AND x.account_key = a.k)
      ORDER BY n ON CONFLICT (business_id, environment, account_key) DO NOTHING RETURNING account_key`,
    [scope.businessId, scope.environment, unique.map(accountKey), unique.map((a) => a.kind), unique.map((a) => a.asset), unique.map((a) => wallet(a)?.walletId ?? null),
      unique.map((a) => wallet(a)?.chain ?? null), [...STRIPED_KINDS]],
  );
  return new Set(created.map((c) => c.account_key));
}

/**
 * Posts a balanced entry in the caller's transaction (the one that writes the state change it records). Every touched
 * single-row account is locked first (in id order, so concurrent posts never deadlock), so concurrent debits of one
 * account serialize on its stored balance; striped accounts take no lock. One round trip when the accounts exist
 * (writeEntry: lock, check and write in one statement); accounts not known to exist are created first.
 */
export async function postEntry(em: EntityManager, scope: EventScope, input: EntryInput): Promise<{ id: string; created: boolean }> {
  assertBalanced(input.postings);
  assertInTransaction(em);
  for (const p of input.postings) {
    if (p.noOverdraft && STRIPED_KINDS.has(p.account.kind)) throw new LedgerError(`${p.account.kind} accounts are striped and cannot be guarded against overdraft`);
  }
  const keys = [...new Set(input.postings.map((p) => accountKey(p.account)))].sort();
  if (input.postings.every((p) => KNOWN_ACCOUNTS.has(knownKey(scope, p.account)))) {
    const posted = await writeEntry(em, scope, input, keys.length);
    if (posted) return posted;
  }
  const unknown = input.postings.filter((p) => !KNOWN_ACCOUNTS.has(knownKey(scope, p.account)));
  // Created before any lock is taken (an insert waiting on a concurrent creator while holding a lock could deadlock).
  const createdHere = unknown.length ? await createAccounts(em, scope, unknown.map((p) => p.account)) : new Set<string>();
  let posted = await writeEntry(em, scope, input, keys.length);
  if (!posted) {
    // Known here but gone (its creator rolled back after another post saw it): rare; create it again and post again.
    for (const key of await createAccounts(em, scope, input.postings.map((p) => p.account))) createdHere.add(key);
    posted = await writeEntry(em, scope, input, keys.length);
  }
  if (KNOWN_ACCOUNTS.size > 100_000) KNOWN_ACCOUNTS.clear();
  // Only accounts that existed before this transaction: one created here is not there for others until it commits.
  for (const p of input.postings) if (!createdHere.has(accountKey(p.account))) KNOWN_ACCOUNTS.add(knownKey(scope, p.account));
  if (!posted) throw new LedgerError(`an account of entry ${input.reference ?? input.kind} is gone though it was just created`);
  return posted;
}

/** The entry a post of the same reference wrote first (this one wrote nothing). */
async function postedBefore(em: EntityManager, scope: EventScope, input: EntryInput): Promise<{ id: string; created: false }> {
  const winner: { id: string }[] = await em.query(
    `SELECT id FROM journal_entries WHERE business_id = $1 AND environment = $2 AND reference = $3`,
    [scope.businessId, scope.environment, input.reference],
  );
  return { id: winner[0].id, created: false };
}

/**
 * The entry and its postings, in one statement: its single-row accounts locked in id order and their stored balances
 * read as locked, a guarded posting (noOverdraft) checked against its account's balance net of the whole entry (two
 * debits of 60 from 100 overdraw it), and the accounts found by key in the write itself (all of them, or nothing is
 * written: undefined, for the caller to create them). A post of the same reference that came first answers that
 * entry, unchecked; an overdraft writes nothing and throws InsufficientFundsError.
 */
async function writeEntry(em: EntityManager, scope: EventScope, input: EntryInput, accounts: number): Promise<{ id: string; created: boolean } | undefined> {
  const [row]: { id: string | null; found: number; existing: string | null; short: { account_key: string; balance: string }[] | null }[] = await em.query(
    planOnce(`WITH locked AS (
       SELECT id, balance FROM ledger_accounts WHERE business_id = $1 AND environment = $2 AND account_key = ANY($7::text[]) AND NOT striped
        ORDER BY id FOR NO KEY UPDATE),
     acc AS (
       SELECT a.id, a.account_key, coalesce(l.balance, 0) AS balance FROM ledger_accounts a LEFT JOIN locked l ON l.id = a.id
        WHERE a.business_id = $1 AND a.environment = $2 AND a.account_key = ANY($7::text[])),
     p AS (SELECT * FROM unnest($7::text[], $8::text[], $9::numeric[], $11::boolean[]) WITH ORDINALITY AS p(account_key, asset, amount, guarded, o)),
     short AS (
       SELECT acc.account_key, acc.balance::text AS balance FROM acc JOIN p ON p.account_key = acc.account_key
        GROUP BY acc.account_key, acc.balance HAVING bool_or(p.guarded) AND acc.balance + sum(p.amount) < 0),
     entry AS (
       INSERT INTO journal_entries (business_id, environment, kind, reference, description, metadata) SELECT $1, $2, $3, $4, $5, $6
        WHERE (SELECT count(*) FROM acc) = $10 AND NOT EXISTS (SELECT 1 FROM short)
       ON CONFLICT (business_id, environment, reference) DO NOTHING RETURNING id),
     postings AS (
       INSERT INTO ledger_postings (entry_id, account_id, business_id, environment, asset, amount)
       SELECT entry.id, acc.id, $1, $2, p.asset, p.amount FROM entry CROSS JOIN p JOIN acc ON acc.account_key = p.account_key ORDER BY p.o)
     SELECT (SELECT id FROM entry) AS id, (SELECT count(*)::int FROM acc) AS found,
            (SELECT e.id FROM journal_entries e WHERE e.business_id = $1 AND e.environment = $2 AND e.reference = $4) AS existing,
            (SELECT json_agg(short) FROM short) AS short`),
    [
      scope.businessId, scope.environment, input.kind, input.reference ?? null, input.description ?? null, JSON.stringify(input.metadata ?? {}),
      input.postings.map((p) => accountKey(p.account)), input.postings.map((p) => p.account.asset), input.postings.map((p) => p.amount.toString()), accounts,
      input.postings.map((p) => Boolean(p.noOverdraft)),
    ],
  );
  if (row!.found < accounts) return undefined;
  if (row!.id) return { id: row!.id, created: true };
  if (row!.existing) return { id: row!.existing, created: false };
  const short = new Map((row!.short ?? []).map((a) => [a.account_key, BigInt(a.balance)]));
  const over = input.postings.find((p) => p.noOverdraft && short.has(accountKey(p.account)));
  if (over) {
    const net = input.postings.filter((p) => accountKey(p.account) === accountKey(over.account)).reduce((sum, p) => sum + p.amount, 0n);
    throw new InsufficientFundsError(over.account, short.get(accountKey(over.account))!, -net);
  }
  return postedBefore(em, scope, input);
}

const touchesGuarded = (entry: EntryInput) => entry.postings.some((p) => !STRIPED_KINDS.has(p.account.kind));

/**
 * A unit's deferred entries (Unit.post, apply()'s unguarded ones), posted last, just before its commit. Entries that
 * lock a guarded account first: a stripe row this transaction touched before asking for a guarded account's lock
 * could be the very row another transaction, holding that lock, waits for (a deadlock).
 */
export async function postAtCommit(em: EntityManager, entries: readonly { scope: EventScope; entry: EntryInput }[]): Promise<void> {
  const guardedFirst = [...entries].sort((a, b) => Number(touchesGuarded(b.entry)) - Number(touchesGuarded(a.entry)));
  for (const { scope, entry } of guardedFirst) await postEntry(em, scope, entry);
}

/**
 * Sandbox funding: simulated USDC from the sandbox faucet into `account`, at once (no status moves with it; the
 * caller answers the new balance). Answers the entry's id.
 */
export async function creditFromFaucet(em: EntityManager, scope: EventScope, account: LedgerAccount, amount: bigint, about: Pick<EntryInput, 'description' | 'metadata'>): Promise<string> {
  const entry = await postEntry(em, scope, {
    kind: 'sandbox_funding', ...about, postings: [{ account: { kind: 'sandbox_faucet', asset: account.asset }, amount: -amount }, { account, amount }],
  });
  return entry.id;
}

/** The balance of an account in minor units: its stored balance, the sum of its postings (zero for an account never used). */
export async function accountBalance(db: DataSource | EntityManager, scope: EventScope, account: LedgerAccount): Promise<bigint> {
  const rows: { balance: string }[] = await db.query(
    `SELECT (CASE WHEN a.striped THEN (SELECT coalesce(sum(s.balance), 0) FROM ledger_balance_stripes s WHERE s.account_id = a.id) ELSE a.balance END)::text AS balance
       FROM ledger_accounts a WHERE a.business_id = $1 AND a.environment = $2 AND a.account_key = $3`,
    [scope.businessId, scope.environment, accountKey(account)],
  );
  return rows[0] ? BigInt(rows[0].balance) : 0n;
}

/**
 * What one entry booked to an account of `kind` (null: no such entry). A sandbox transfer's job names its entry and
 * reads the amount here, where it was booked, never from the job's data (CONTRACT §18: jobs carry references).
 */
export async function bookedTo(db: DataSource | EntityManager, scope: EventScope, reference: string, kind: LedgerAccount['kind']): Promise<bigint | null> {
  const rows: { amount: string }[] = await db.query(
    planOnce(`SELECT p.amount::text AS amount FROM journal_entries e
       JOIN ledger_postings p ON p.entry_id = e.id JOIN ledger_accounts a ON a.id = p.account_id
      WHERE e.business_id = $1 AND e.environment = $2 AND e.reference = $3 AND a.kind = $4`),
    [scope.businessId, scope.environment, reference, kind],
  );
  return rows[0] ? BigInt(rows[0].amount) : null;
}

export interface LedgerInconsistencies {
  /** Entries with fewer than two postings, or whose postings in an asset do not sum to zero. */
  unbalancedEntries: { entry_id: string; asset: string | null; postings: number; total: string }[];
  /** Accounts whose stored balance or version differs from the sum or count of their postings. */
  driftedAccounts: { account_id: string; account_key: string; balance: string; posted: string; version: string; postings: string }[];
}

/** Scans the whole ledger (each query in one snapshot) for what the database should make impossible; empty lists when sound. */
export async function findLedgerInconsistencies(db: DataSource | EntityManager, opts: { entriesSince?: Date } = {}): Promise<LedgerInconsistencies> {
  const unbalancedEntries: LedgerInconsistencies['unbalancedEntries'] = await db.query(`
    WITH per_asset AS (
      SELECT e.id AS entry_id, p.asset, count(p.id) AS postings, coalesce(sum(p.amount), 0) AS total
        FROM journal_entries e LEFT JOIN ledger_postings p ON p.entry_id = e.id WHERE e.created_at >= $1 GROUP BY e.id, p.asset)
    SELECT entry_id, asset, postings::int AS postings, total::text AS total FROM per_asset
     WHERE total <> 0 OR entry_id IN (SELECT entry_id FROM per_asset GROUP BY entry_id HAVING sum(postings) < 2)`, [opts.entriesSince ?? new Date(0)]);
  const driftedAccounts: LedgerInconsistencies['driftedAccounts'] = await db.query(`
    WITH stored AS (
      SELECT a.id, a.account_key,
             CASE WHEN a.striped THEN coalesce(st.balance, 0) ELSE a.balance END AS balance,
             CASE WHEN a.striped THEN coalesce(st.version, 0) ELSE a.version END AS version,
             a.striped AND (a.balance <> 0 OR a.version <> 0) AS stray
        FROM ledger_accounts a
        LEFT JOIN (SELECT account_id, sum(balance) AS balance, sum(version) AS version FROM ledger_balance_stripes GROUP BY account_id) st ON st.account_id = a.id)
    SELECT a.id AS account_id, a.account_key, a.balance::text AS balance, coalesce(s.total, 0)::text AS posted,
           a.version::text AS version, coalesce(s.postings, 0)::text AS postings
      FROM stored a
      LEFT JOIN (SELECT account_id, sum(amount) AS total, count(*) AS postings FROM ledger_postings GROUP BY account_id) s ON s.account_id = a.id
     WHERE a.balance <> coalesce(s.total, 0) OR a.version <> coalesce(s.postings, 0) OR a.stray`);
  return { unbalancedEntries, driftedAccounts };
}

/**
 * The stored balance of one account, its row locked until the caller's transaction ends (zero if it has no row yet).
 * Lets a step check and hold a debit early, and post the entry (which locks shared clearing accounts) last.
 */
export async function lockedBalance(em: EntityManager, scope: EventScope, account: LedgerAccount): Promise<bigint> {
  if (STRIPED_KINDS.has(account.kind)) throw new LedgerError(`${account.kind} accounts are striped: they have no single balance to hold`);
  const rows: { balance: string }[] = await em.query(
    `SELECT balance::text AS balance FROM ledger_accounts WHERE business_id = $1 AND environment = $2 AND account_key = $3 FOR NO KEY UPDATE`,
    [scope.businessId, scope.environment, accountKey(account)],
  );
  return rows[0] ? BigInt(rows[0].balance) : 0n;
}
