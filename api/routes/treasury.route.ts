import type { DataSource } from 'typeorm';
import { CHAINS } from '../../shared/domain/chains.js';
import type { EventScope } from '../../shared/domain/events.js';
import { accountKey, type LedgerAccount, type LedgerAccountKind } from '../../shared/domain/ledger.js';
import { fromMinor, scaleOf, USDC_SCALE } from '../../shared/domain/money.js';
import { allRows, listPage, scopedWhere, type PageQuery } from '../../shared/db/pagination.js';
import { listOf, paginationQuery } from '../openapi/components.js';
import { ref, type JsonSchema, type RouteDef } from './route.js';

// The business's treasury as the ledger sees it: two balances, and the journal every balance is derived from.

const ACCOUNT_KINDS = [
  'wallet', 'treasury', 'treasury_pending', 'inbound_clearing', 'platform_fees', 'provider_clearing', 'settlement_clearing', 'sandbox_faucet',
] as const satisfies readonly LedgerAccountKind[];
// A kind added to the ledger but not listed here fails to compile (its postings would otherwise break the contract).
type UnlistedKind = Exclude<LedgerAccountKind, (typeof ACCOUNT_KINDS)[number]>;
const EVERY_ACCOUNT_KIND_LISTED: [UnlistedKind] extends [never] ? true : never = true;

const SIGNED_AMOUNT = {
  type: 'string',
  pattern: '^-?(0|[1-9][0-9]*)(\\.[0-9]+)?$',
  description: 'A signed decimal amount at exactly the asset\'s scale: positive adds to the account, negative takes from it.',
};

export const schemas: Record<string, JsonSchema> = {
  TreasuryBalance: {
    type: 'object',
    required: ['asset', 'available', 'pending', 'updated_at'],
    properties: {
      asset: { type: 'string', enum: ['USDC'] },
      available: { ...ref('DecimalAmount'), description: 'Confirmed USDC that payouts can spend, at exactly 6 decimals.' },
      pending: { ...ref('DecimalAmount'), description: 'Payments seen but not yet confirmed, at exactly 6 decimals; not spendable.' },
      updated_at: { type: ['string', 'null'], format: 'date-time', description: 'When either balance last moved; null if it never has.' },
    },
  },
  LedgerPosting: {
    type: 'object',
    required: ['account', 'amount'],
    properties: {
      account: {
        type: 'object',
        required: ['kind', 'asset', 'wallet_id', 'chain'],
        properties: {
          kind: { type: 'string', enum: [...ACCOUNT_KINDS] },
          asset: { type: 'string', pattern: '^[A-Z]{3,5}$' },
          wallet_id: { type: ['string', 'null'], format: 'uuid', description: 'The wallet a `wallet` account belongs to; null for other kinds.' },
          chain: { type: ['string', 'null'], enum: [...CHAINS, null], description: 'The chain of a `wallet` account; null for other kinds.' },
        },
      },
      amount: SIGNED_AMOUNT,
    },
  },
  LedgerEntry: {
    type: 'object',
    required: ['id', 'kind', 'reference', 'description', 'metadata', 'created_at', 'postings'],
    properties: {
      id: ref('Uuid'),
      kind: { type: 'string', description: 'What caused it: `sandbox_funding`, `offramp_payout`, `treasury_deposit_pending`, `treasury_deposit_confirmed`, `treasury_payout_funding`, ...' },
      reference: { type: ['string', 'null'], description: 'The business fact it records (one entry per reference).' },
      description: { type: ['string', 'null'] },
      metadata: { type: 'object' },
      created_at: ref('Timestamp'),
      postings: { type: 'array', minItems: 2, items: ref('LedgerPosting'), description: 'In the order they were posted; they sum to zero per asset.' },
    },
  },
  LedgerEntryList: listOf('LedgerEntry'),
};

const TAG = 'Treasury';
const TIME = { type: 'string', format: 'date-time' };
const TREASURY: LedgerAccount = { kind: 'treasury', asset: 'USDC' };
const TREASURY_PENDING: LedgerAccount = { kind: 'treasury_pending', asset: 'USDC' };

interface BalanceRow {
  available: string;
  pending: string;
  updated_at: Date | null;
}

/**
 * Both balances and the time of the last posting to either account, in one statement (one snapshot, one round trip).
 * A striped account's balance is the sum of its stripes; an account never used has no row and counts as zero.
 */
async function treasuryBalance(db: DataSource, scope: EventScope) {
  const rows: BalanceRow[] = await db.query(
    `WITH accounts AS (
       SELECT a.id, a.account_key,
              CASE WHEN a.striped THEN (SELECT coalesce(sum(s.balance), 0) FROM ledger_balance_stripes s WHERE s.account_id = a.id) ELSE a.balance END AS balance
         FROM ledger_accounts a
        WHERE a.business_id = $1 AND a.environment = $2 AND a.account_key IN ($3, $4))
     SELECT coalesce(sum(balance) FILTER (WHERE account_key = $3), 0)::text AS available,
            coalesce(sum(balance) FILTER (WHERE account_key = $4), 0)::text AS pending,
            (SELECT max(p.created_at) FROM ledger_postings p WHERE p.account_id IN (SELECT id FROM accounts)) AS updated_at
       FROM accounts`,
    [scope.businessId, scope.environment, accountKey(TREASURY), accountKey(TREASURY_PENDING)],
  );
  const row = rows[0];
  return {
    asset: 'USDC',
    available: fromMinor(BigInt(row.available), USDC_SCALE),
    pending: fromMinor(BigInt(row.pending), USDC_SCALE),
    updated_at: row.updated_at ? row.updated_at.toISOString() : null,
  };
}

interface LedgerQuery extends PageQuery {
  kind?: string;
  created_gte?: string;
  created_lte?: string;
}

const FILTERS: [keyof LedgerQuery, string][] = [['kind', 'e.kind = $'], ['created_gte', 'e.created_at >= $'], ['created_lte', 'e.created_at <= $']];

interface EntryRow {
  id: string;
  kind: string;
  reference: string | null;
  description: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  cursor_ts: string;
}

interface PostingRow {
  entry_id: string;
  asset: string;
  amount: string;
  kind: LedgerAccountKind;
  wallet_id: string | null;
  chain: string | null;
}

function postingView(row: PostingRow) {
  return {
    account: { kind: row.kind, asset: row.asset, wallet_id: row.wallet_id, chain: row.chain },
    amount: fromMinor(BigInt(row.amount), scaleOf(row.asset)),
  };
}

/**
 * The postings of a page of entries, in one query, grouped by entry in the order they were written. A committed entry
 * is sealed with its postings (migrations/1763800003000-ledger-sealed-entries.ts), so any entry the page saw has them all.
 */
async function postingsOf(db: DataSource, scope: EventScope, entryIds: string[]): Promise<Map<string, ReturnType<typeof postingView>[]>> {
  const byEntry = new Map<string, ReturnType<typeof postingView>[]>(entryIds.map((id) => [id, []]));
  if (!entryIds.length) return byEntry;
  const rows: PostingRow[] = await db.query(
    `SELECT p.entry_id, p.asset, p.amount::text AS amount, a.kind, a.wallet_id, a.chain
       FROM ledger_postings p JOIN ledger_accounts a ON a.id = p.account_id
      WHERE p.entry_id = ANY($1::uuid[]) AND p.business_id = $2 AND p.environment = $3
      ORDER BY p.entry_id, p.id`,
    [entryIds, scope.businessId, scope.environment],
  );
  for (const row of rows) byEntry.get(row.entry_id)!.push(postingView(row));
  return byEntry;
}

/** The columns of a ledger export (CONTRACT 16): one row per posting. */
const LEDGER_CSV_COLUMNS = ['entry_id', 'created_at', 'kind', 'reference', 'account', 'asset', 'amount'] as const;

async function listLedger(db: DataSource, scope: EventScope, q: LedgerQuery) {
  const { where, params } = scopedWhere('e', scope, q as Record<string, unknown>, FILTERS);
  const columns = 'e.id, e.kind, e.reference, e.description, e.metadata, e.created_at';
  const page = await listPage<EntryRow, EntryRow>(db, { columns, from: 'journal_entries e', alias: 'e', where, params }, q, (row) => row);
  const postings = await postingsOf(db, scope, page.data.map((e) => e.id));
  return {
    ...page,
    data: page.data.map((e) => ({
      id: e.id,
      kind: e.kind,
      reference: e.reference,
      description: e.description,
      metadata: e.metadata,
      created_at: e.created_at.toISOString(),
      postings: postings.get(e.id)!,
    })),
  };
}

export const routes: RouteDef[] = [
  {
    method: 'get',
    path: '/treasury/balance',
    operationId: 'getTreasuryBalance',
    summary: 'The treasury\'s USDC: available and pending.',
    description:
      '`available` is confirmed USDC that payouts can spend; `pending` is payments seen but not yet confirmed. ' +
      'Both are ledger balances (see `GET /treasury/ledger`), at exactly 6 decimals.',
    tag: TAG,
    scope: 'treasury:read',
    responses: { '200': { description: 'The treasury balance.', schema: ref('TreasuryBalance') } },
    handler: async ({ deps, auth }) => ({ status: 200, body: await treasuryBalance(deps.ds, auth) }),
  },
  {
    method: 'get',
    path: '/treasury/ledger',
    operationId: 'listTreasuryLedger',
    summary: 'List the journal entries of the ledger, newest first.',
    description:
      'Every balance in the service (the treasury\'s, the pending side\'s, each wallet\'s) is derived from these entries: an account\'s ' +
      'balance is the sum of its postings. The postings of an entry sum to zero per asset (value only moves between accounts), ' +
      'and entries are append-only: a correction is a new entry, never an edit. Amounts are signed decimal strings at the asset\'s scale.',
    tag: TAG,
    scope: 'treasury:read',
    query: {
      ...paginationQuery,
      kind: { schema: { type: 'string', minLength: 1, maxLength: 64 }, description: 'Only entries of this kind, e.g. `sandbox_funding`, `offramp_payout`, `treasury_deposit`.' },
      created_gte: { schema: TIME, description: 'Created at or after this instant.' },
      created_lte: { schema: TIME, description: 'Created at or before this instant.' },
    },
    responses: {
      '200': {
        description: 'A page of journal entries, each with its postings; with `Accept: text/csv`, every posting of every entry the filters match (at most 100,000 entries, newest first), streamed as CSV.',
        schema: ref('LedgerEntryList'),
        csv: `RFC 4180, a header row, one posting per row: ${LEDGER_CSV_COLUMNS.join(', ')}. \`amount\` is signed, so an entry's rows sum to zero per asset; \`account\` is the account's kind, then its wallet id and chain when it has them (\`wallet_usdc:<wallet id>:base\`). A \`reference\` that begins with \`=\`, \`+\`, \`-\`, \`@\`, a tab or a carriage return is written with a \`'\` before it; \`amount\` never is.`,
      },
    },
    handler: async ({ deps, auth, query }) => ({ status: 200, body: await listLedger(deps.ds, auth, query as LedgerQuery) }),
    csv: {
      columns: LEDGER_CSV_COLUMNS,
      text: ['reference'],
      rows: ({ deps, auth, query }) => {
        const { where, params } = scopedWhere('e', auth, query as Record<string, unknown>, FILTERS);
        return allRows<EntryRow, Record<string, unknown>>(deps.ds, { columns: 'e.id, e.kind, e.reference, e.created_at', from: 'journal_entries e', alias: 'e', where, params }, async (entries) => {
          const postings = await postingsOf(deps.ds, auth, entries.map((e) => e.id));
          return entries.flatMap((e) => postings.get(e.id)!.map((p) => ({
            entry_id: e.id, created_at: e.created_at, kind: e.kind, reference: e.reference,
            account: [p.account.kind, p.account.wallet_id, p.account.chain].filter(Boolean).join(':'), asset: p.account.asset, amount: p.amount,
          })));
        });
      },
    },
  },
];
