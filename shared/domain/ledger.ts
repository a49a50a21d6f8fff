import type { DataSource, EntityManager } from 'typeorm';
import type { Chain } from './chains.js';
import type { EventScope } from './events.js';

// The double-entry ledger every balance is derived from. An entry's postings sum to zero per asset (checked here,
// and by a deferred constraint trigger at commit); entries and postings are append-only. Amounts are bigint minor
// units; a posting's sign is the direction of value: positive adds to the account's balance, negative takes from it.
// Each account stores its balance and version (its count of postings); a database trigger applies every posting to
// them, and nothing else may change them (migrations/1763800005000-ledger-stored-balances.ts).

export type LedgerAccountKind = 'wallet' | 'treasury' | 'platform_fees' | 'provider_clearing' | 'settlement_clearing' | 'sandbox_faucet';

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
  await em.query(
    `INSERT INTO ledger_accounts (business_id, environment, account_key, kind, asset, wallet_id, chain) VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (business_id, environment, account_key) DO NOTHING`,
    [...params, account.kind, account.asset, wallet?.walletId ?? null, wallet?.chain ?? null],
  );
  const rows: { id: string }[] = await em.query(`SELECT id FROM ledger_accounts WHERE business_id = $1 AND environment = $2 AND account_key = $3`, params);
  return rows[0].id;
}

/** Locks the accounts in id order (every caller takes them in the same order, so posts never deadlock) and reads their stored balances. */
async function lockAccounts(em: EntityManager, accountIds: string[]): Promise<Map<string, bigint>> {
  const rows: { id: string; balance: string }[] = await em.query(
    `SELECT id, balance::text AS balance FROM ledger_accounts WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE`,
    [accountIds],
  );
  return new Map(rows.map((r) => [r.id, BigInt(r.balance)]));
}

/**
 * Posts a balanced entry in the caller's transaction (the one that writes the state change it records).
 * Every touched account is locked first, so concurrent debits of one account serialize on its stored balance.
 */
export async function postEntry(em: EntityManager, scope: EventScope, input: EntryInput): Promise<{ id: string; created: boolean }> {
  assertBalanced(input.postings);
  assertInTransaction(em);
  const ordered = [...input.postings].sort((a, b) => accountKey(a.account).localeCompare(accountKey(b.account)));
  const ids = new Map<PostingInput, string>();
  for (const p of ordered) ids.set(p, await ensureAccount(em, scope, p.account));

  // The posting trigger updates each touched account's row; locking them all here, in order, keeps that from deadlocking.
  const balances = await lockAccounts(em, [...new Set(ids.values())]);
  if (input.reference) {
    const existing: { id: string }[] = await em.query(
      `SELECT id FROM journal_entries WHERE business_id = $1 AND environment = $2 AND reference = $3`,
      [scope.businessId, scope.environment, input.reference],
    );
    if (existing[0]) return { id: existing[0].id, created: false };
  }
  // Checked against the locked stored balance, net of the whole entry: two debits of 60 from 100 overdraw it.
  const net = new Map<string, bigint>();
  for (const p of ordered) net.set(ids.get(p)!, (net.get(ids.get(p)!) ?? 0n) + p.amount);
  for (const p of ordered) {
    const id = ids.get(p)!;
    if (p.noOverdraft && balances.get(id)! + net.get(id)! < 0n) throw new InsufficientFundsError(p.account, balances.get(id)!, -net.get(id)!);
  }

  const entry: { id: string }[] = await em.query(
    `INSERT INTO journal_entries (business_id, environment, kind, reference, description, metadata) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (business_id, environment, reference) DO NOTHING RETURNING id`,
    [scope.businessId, scope.environment, input.kind, input.reference ?? null, input.description ?? null, JSON.stringify(input.metadata ?? {})],
  );
  if (!entry[0]) {
    // A concurrent post of the same reference committed first.
    const winner: { id: string }[] = await em.query(
      `SELECT id FROM journal_entries WHERE business_id = $1 AND environment = $2 AND reference = $3`,
      [scope.businessId, scope.environment, input.reference],
    );
    return { id: winner[0].id, created: false };
  }
  await em.query(
    `INSERT INTO ledger_postings (entry_id, account_id, business_id, environment, asset, amount)
     SELECT $1, account_id, $2, $3, asset, amount FROM unnest($4::uuid[], $5::text[], $6::numeric[]) AS p(account_id, asset, amount)`,
    [entry[0].id, scope.businessId, scope.environment, ordered.map((p) => ids.get(p)), ordered.map((p) => p.account.asset), ordered.map((p) => p.amount.toString())],
  );
  return { id: entry[0].id, created: true };
}

/** The balance of an account in minor units: its stored balance, the sum of its postings (zero for an account never used). */
export async function accountBalance(db: DataSource | EntityManager, scope: EventScope, account: LedgerAccount): Promise<bigint> {
  const rows: { balance: string }[] = await db.query(
    `SELECT balance::text AS balance FROM ledger_accounts WHERE business_id = $1 AND environment = $2 AND account_key = $3`,
    [scope.businessId, scope.environment, accountKey(account)],
  );
  return rows[0] ? BigInt(rows[0].balance) : 0n;
}

export interface LedgerInconsistencies {
  /** Entries with fewer than two postings, or whose postings in an asset do not sum to zero. */
  unbalancedEntries: { entry_id: string; asset: string | null; postings: number; total: string }[];
  /** Accounts whose stored balance or version differs from the sum or count of their postings. */
  driftedAccounts: { account_id: string; account_key: string; balance: string; posted: string; version: string; postings: string }[];
}

/** Scans the whole ledger (each query in one snapshot) for what the database should make impossible; empty lists when sound. */
export async function findLedgerInconsistencies(db: DataSource | EntityManager): Promise<LedgerInconsistencies> {
  const unbalancedEntries: LedgerInconsistencies['unbalancedEntries'] = await db.query(`
    WITH per_asset AS (
      SELECT e.id AS entry_id, p.asset, count(p.id) AS postings, coalesce(sum(p.amount), 0) AS total
        FROM journal_entries e LEFT JOIN ledger_postings p ON p.entry_id = e.id GROUP BY e.id, p.asset)
    SELECT entry_id, asset, postings::int AS postings, total::text AS total FROM per_asset
     WHERE total <> 0 OR entry_id IN (SELECT entry_id FROM per_asset GROUP BY entry_id HAVING sum(postings) < 2)`);
  const driftedAccounts: LedgerInconsistencies['driftedAccounts'] = await db.query(`
    SELECT a.id AS account_id, a.account_key, a.balance::text AS balance, coalesce(s.total, 0)::text AS posted,
           a.version::text AS version, coalesce(s.postings, 0)::text AS postings
      FROM ledger_accounts a
      LEFT JOIN (SELECT account_id, sum(amount) AS total, count(*) AS postings FROM ledger_postings GROUP BY account_id) s ON s.account_id = a.id
     WHERE a.balance <> coalesce(s.total, 0) OR a.version <> coalesce(s.postings, 0)`);
  return { unbalancedEntries, driftedAccounts };
}
