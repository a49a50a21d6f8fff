import { randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import { AppError } from '../errors.js';
import type { Unit } from '../db/unit-of-work.js';
import { findScoped } from '../db/pagination.js';
import type { Chain } from './chains.js';
import type { EventScope } from './events.js';
import { rateText, renderAmount } from './money.js';
import { redactPhone, sealedPayerColumns, type KeyConfig } from './payer-data.js';
import { QUOTE_MACHINE, TRANSACTION_MACHINE, type RefundStatus, type TransactionStatus } from './machines.js';
import type { RefundData, RefundState } from '../kernel/refund-machine.js';
import { insertCreated, transition } from './transition.js';
import { effectiveStatus, type QuoteRow } from './quotes.js';
import { assertActive, findWallet, type WalletRow } from './wallets.js';
import { joinedColumns } from '../db/joined-columns.js';
import type { Direction, PaymentMethod } from './corridors.js';
import { byIdInScope, planOnce } from '../db/prepared-client.js';
import { JOINED_SETTLEMENT, type SettlementRow } from './settlements.js';
import { rowVersion } from '../db/row-version.js';

type Queryable = Pick<DataSource | EntityManager, 'query'>;

export interface TransactionRow {
  id: string;
  business_id: string;
  environment: 'sandbox' | 'live';
  direction: Direction;
  status: TransactionStatus;
  quote_id: string;
  external_reference: string | null;
  chain: Chain;
  currency: string;
  payment_method: PaymentMethod;
  exchange_rate: string;
  source_amount: string;
  total_required: string;
  destination_amount: string;
  provider_fee: string;
  platform_fee: string;
  beneficiary_id: string | null;
  /** Null only for a payout funded from the treasury. */
  wallet_id: string | null;
  wallet_address: string | null;
  customer_id: string | null;
  /** The payment intent whose payment a treasury-funded payout spends. */
  payment_intent_id: string | null;
  /** The payout batch a treasury-funded payout is an item of, and its 0-based position there. */
  payout_batch_id: string | null;
  payout_batch_index: number | null;
  funding_type: 'managed_wallet' | 'external_wallet' | 'treasury' | 'liquidation_address' | null;
  /** The liquidation address whose incoming transfer this off-ramp pays out (CONTRACT section 16). */
  liquidation_address_id: string | null;
  /** The payer's phone as shown (`+254*****3344`); the number itself is sealed (payer-data.ts). */
  payer_phone_redacted: string | null;
  payer_network: string | null;
  provider_reference: string | null;
  /** The M-Pesa receipt (MpesaReceiptNumber, TransactionID) once known: the view's provider_reference. */
  receipt: string | null;
  destination_transaction_hash: string | null;
  failure: { code: string; message: string; details?: unknown } | null;
  /** `amount`: everything returned so far; `to_address`: where (null: the treasury's balance). Its status: refund_status. */
  refund: RefundData | null;
  /** The refund's place in REFUND_MACHINE (machines.ts); null exactly when `refund` is. */
  refund_status: RefundStatus | null;
  /** External-wallet off-ramps: where refunds go instead of from_address. */
  refund_address: string | null;
  /** When the USDC this off-ramp holds goes back without the business (underpaid, late_deposit, an excess); null: none due. */
  refund_due_at: Date | null;
  stalled_at: TransactionStatus | null;
  retry_count: number;
  forced_outcome: { outcome: 'completed' | 'failed' | 'action_required'; failure_code?: string } | null;
  completed_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export type { RefundData, RefundState };

/** The refund as decided and shown: the row's status (refund_status) with its data; null when there is none. */
export function refundOf(row: Pick<TransactionRow, 'refund' | 'refund_status'>): RefundState | null {
  return row.refund && row.refund_status ? { status: row.refund_status, ...row.refund } : null;
}

export const TRANSACTION_COLUMNS = `t.id, t.business_id, t.environment, t.direction, t.status, t.quote_id, t.external_reference, t.chain, t.currency, t.payment_method,
  t.exchange_rate::text, t.source_amount::text, t.total_required::text, t.destination_amount::text, t.provider_fee::text, t.platform_fee::text,
  t.beneficiary_id, t.wallet_id, t.wallet_address, t.customer_id, t.payment_intent_id, t.payout_batch_id, t.payout_batch_index, t.funding_type, t.liquidation_address_id, t.payer_phone_redacted, t.payer_network, t.provider_reference, t.receipt,
  t.destination_transaction_hash, t.failure, t.refund, t.refund_status, t.refund_address, t.refund_due_at, t.stalled_at, t.retry_count, t.forced_outcome, t.completed_at, t.created_at, t.updated_at`;

/** What the view (transactionView) reads of a row: an answer's read selects these and no more. */
const VIEW_FIELDS = [
  'id', 'direction', 'status', 'quote_id', 'external_reference', 'chain', 'currency', 'exchange_rate', 'source_amount', 'total_required',
  'destination_amount', 'provider_fee', 'platform_fee', 'beneficiary_id', 'wallet_id', 'wallet_address', 'customer_id', 'payment_intent_id',
  'payout_batch_id', 'funding_type', 'liquidation_address_id', 'payer_phone_redacted', 'payer_network', 'provider_reference', 'receipt',
  'destination_transaction_hash', 'failure', 'refund', 'refund_status', 'refund_address', 'completed_at', 'created_at', 'updated_at',
] as const satisfies readonly (keyof TransactionRow)[];
export type TransactionViewRow = Pick<TransactionRow, (typeof VIEW_FIELDS)[number]>;
const NUMERIC_FIELDS = new Set(['exchange_rate', 'source_amount', 'total_required', 'destination_amount', 'provider_fee', 'platform_fee']);
/** The columns of TRANSACTION_COLUMNS the view reads, in its form (numerics as text). */
export const TRANSACTION_VIEW_COLUMNS = VIEW_FIELDS.map((f) => `t.${f}${NUMERIC_FIELDS.has(f) ? '::text' : ''}`).join(', ');

export const scopeOf = (row: { business_id: string; environment: 'sandbox' | 'live' }): EventScope => ({ businessId: row.business_id, environment: row.environment });

const amount = renderAmount;

function refundView(refund: RefundState | null): Record<string, unknown> | null {
  if (!refund) return null;
  // The status (refund_status) first, where the JSON held it: the view is what it was.
  const usdcBack = { status: refund.status, amount: refund.amount, to_address: refund.to_address ?? null, transaction_hash: refund.transaction_hash };
  if (!refund.currency) return usdcBack;
  return { ...usdcBack, currency: refund.currency, phone_number: refund.phone_number ?? null, provider_reference: refund.provider_reference ?? null, failure: refund.failure ?? null };
}

/**
 * The transaction as the API, events and webhooks show it. Each object is written out whole, with no spread: a page
 * of 25 renders 25 of them, and spreads into a literal of this size took most of the time a view took.
 */
export function transactionView(row: TransactionViewRow, extra: { settlement?: Record<string, unknown> } = {}): Record<string, unknown> {
  const offramp = row.direction === 'offramp';
  // An off-ramp goes from USDC to its currency, an on-ramp the other way (sidesOf); a fiat side names its currency.
  const fiat = row.currency;
  const paid = offramp ? 'USDC' : fiat;
  const fields = {
    id: row.id,
    direction: row.direction,
    quote_id: row.quote_id,
    status: row.status,
    source: offramp
      ? { asset: 'USDC', amount: amount(row.source_amount, paid), total_required: amount(row.total_required, paid), chain: row.chain }
      : { currency: fiat, amount: amount(row.source_amount, paid), total_required: amount(row.total_required, paid) },
    destination: offramp
      ? { currency: fiat, amount: amount(row.destination_amount, fiat) }
      : { asset: 'USDC', amount: amount(row.destination_amount, 'USDC'), chain: row.chain, wallet_address: row.wallet_address, transaction_hash: row.destination_transaction_hash },
    fees: { provider: amount(row.provider_fee, paid), platform: amount(row.platform_fee, paid), currency: paid },
    exchange_rate: rateText(row.exchange_rate),
    external_reference: row.external_reference,
    beneficiary_id: row.beneficiary_id,
    wallet_id: row.wallet_id,
    customer_id: row.customer_id,
    payment_intent_id: row.payment_intent_id,
    payout_batch_id: row.payout_batch_id,
    funding_source: offramp
      ? row.funding_type === 'treasury'
        ? { type: 'treasury', reference: row.payment_intent_id ?? row.payout_batch_id, address: row.wallet_address }
        : row.funding_type === 'liquidation_address'
          ? { type: 'liquidation_address', reference: row.liquidation_address_id, address: row.wallet_address }
          : { type: row.funding_type, reference: row.wallet_id, address: row.wallet_address }
      : null,
    liquidation_address_id: row.liquidation_address_id,
    payment_source: offramp ? null : { type: 'mobile_money', reference: row.provider_reference, phone_number: row.payer_phone_redacted, mobile_network: row.payer_network },
    provider_reference: row.receipt,
    failure: row.failure,
    refund: refundView(refundOf(row)),
    refund_address: row.refund_address,
  };
  const completed_at = row.completed_at ? row.completed_at.toISOString() : null;
  const created_at = row.created_at.toISOString();
  const updated_at = row.updated_at.toISOString();
  return extra.settlement
    ? Object.assign(fields, { settlement: extra.settlement, completed_at, created_at, updated_at })
    : Object.assign(fields, { completed_at, created_at, updated_at });
}

export function findTransaction(q: Queryable, scope: EventScope, id: string, lock = false): Promise<TransactionRow> {
  return findScoped(q, { from: 'transactions t', columns: TRANSACTION_COLUMNS, resource: 'transaction' }, scope, id, lock);
}

/**
 * A transaction as its view reads it, with its settlement (an off-ramp's; none for an on-ramp), in one statement, and
 * the version of the two rows it saw (rowVersion).
 */
export async function findTransactionWithSettlement(
  q: Queryable, scope: EventScope, id: string,
): Promise<{ tx: TransactionViewRow; settlement?: SettlementRow; version: string }> {
  const row = await findScoped<TransactionViewRow & Record<string, unknown> & { row_version: string; settlement_version: string | null }>(
    q,
    {
      from: 'transactions t LEFT JOIN settlements s ON s.transaction_id = t.id',
      alias: 't',
      columns: `${TRANSACTION_VIEW_COLUMNS}, ${JOINED_SETTLEMENT.select}, ${rowVersion('t')} AS row_version, ${rowVersion('s')} AS settlement_version`,
      resource: 'transaction',
    },
    scope, id,
  );
  return { tx: row, settlement: JOINED_SETTLEMENT.take(row), version: `${row.row_version}/${row.settlement_version ?? ''}` };
}

/** For jobs, which carry ids only. */
export async function loadTransaction(q: Queryable, id: string): Promise<TransactionRow | undefined> {
  return ((await q.query(planOnce(`SELECT ${TRANSACTION_COLUMNS} FROM transactions t WHERE t.id = $1`), [id])) as TransactionRow[])[0];
}

/** The row as it is now, locked for the caller's unit: what a decision that may move it must read. */
export async function lockTransaction(unit: Unit, id: string): Promise<TransactionRow | undefined> {
  return ((await unit.em.query(planOnce(`SELECT ${TRANSACTION_COLUMNS} FROM transactions t WHERE t.id = $1 FOR NO KEY UPDATE`), [id])) as TransactionRow[])[0];
}

/** A quote being consumed, with its beneficiary's status (null: none, an on-ramp's) held until the unit commits. */
export type ConsumedQuote = QuoteRow & { beneficiary_status: string | null };

/**
 * Consumes the quote for a new transaction, in the caller's transaction: the quote row is locked, its state
 * decides the answer, and the unique transactions.quote_id makes a second consumption impossible whatever Redis knows.
 */
export async function consumeQuote(
  unit: Unit, scope: EventScope, quoteId: string, direction: Direction, walletId: string | null,
): Promise<{ quote: ConsumedQuote; wallet: WalletChecked | undefined }> {
  // An off-ramp quote's beneficiary is read in the same statement, held (FOR SHARE) against an archive until commit,
  // and the wallet the transaction uses (`walletId`, or the quote's own), for usableWalletOf.
  const rows: (ConsumedQuote & Record<string, unknown>)[] = await unit.em.query(
    planOnce(`SELECT q.id, q.business_id, q.environment, q.direction, q.status, q.chain, q.currency, q.payment_method, q.requested_side, q.requested_amount::text,
            q.beneficiary_id, q.wallet_id, q.exchange_rate::text, q.source_amount::text, q.total_required::text, q.destination_amount::text, q.provider_fee::text,
            q.platform_fee::text, q.expires_at, q.failure, q.created_at, q.updated_at, b.status AS beneficiary_status, ${JOINED_WALLET.select}
       FROM quotes q LEFT JOIN LATERAL (SELECT status FROM beneficiaries WHERE id = q.beneficiary_id FOR SHARE) b ON true
       ${walletJoin('coalesce($4::uuid, q.wallet_id)', 'q')}
      WHERE ${byIdInScope('q')} FOR UPDATE OF q`),
    [quoteId, scope.businessId, scope.environment, walletId],
  );
  if (!rows[0]) throw new AppError('not_found', 'No such quote.', { param: 'quote_id' });
  const quote = JOINED_WALLET.strip<ConsumedQuote>(rows[0]);
  const status = effectiveStatus(quote);
  if (status === 'consumed') throw await quoteAlreadyUsed(unit, quoteId);
  if (status === 'expired') throw new AppError('quote_expired', 'This quote has expired; request a new quote.', { quote_id: quoteId, expires_at: quote.expires_at?.toISOString() });
  if (status !== 'available') throw new AppError('quote_not_available', `This quote is ${status} and cannot be used.`, { quote_id: quoteId, status });
  if (quote.direction !== direction) {
    throw new AppError('quote_direction_mismatch', `This is an ${quote.direction} quote; it cannot start an ${direction}.`, { quote_id: quoteId, direction: quote.direction });
  }
  const moved = await transition(unit, QUOTE_MACHINE, { scope, id: quoteId, to: 'consumed', expected: quote.status, view: () => ({}) });
  if (!moved) throw await quoteAlreadyUsed(unit, quoteId);
  return { quote, wallet: JOINED_WALLET.take(rows[0]) };
}

/**
 * The quote (the caller's: it was read in the caller's scope) already started a transaction: the answer names it, so
 * a client whose first answer was lost follows that payment instead of quoting and paying a second time.
 */
async function quoteAlreadyUsed(unit: Unit, quoteId: string): Promise<AppError> {
  const [started]: { id: string }[] = await unit.em.query(planOnce(`SELECT id FROM transactions WHERE quote_id = $1`), [quoteId]);
  return started
    ? new AppError('quote_already_used', `This quote already started transaction ${started.id}; retrieve that transaction (GET /transactions/{id}) instead of starting another.`, { quote_id: quoteId, transaction_id: started.id })
    : new AppError('quote_already_used', 'This quote has already been used.', { quote_id: quoteId });
}

export interface NewTransaction {
  quote: QuoteRow;
  /** Null for a treasury-funded payout, which names its funding address and intent (or batch) instead. */
  wallet: { id: string; address: string; customer_id: string | null } | null;
  fundingAddress?: string | null;
  paymentIntentId?: string;
  /** A payout batch's item: the batch and the item's 0-based position in it. */
  payoutBatch?: { id: string; index: number };
  customerId?: string | null;
  status: TransactionStatus;
  externalReference?: string | null;
  fundingType?: TransactionRow['funding_type'];
  /** An on-ramp's payer: the phone is sealed under `keys` and kept only redacted in the clear. */
  payer?: { phone_number: string; mobile_network: string; keys: KeyConfig };
  refundAddress?: string | null;
  liquidationAddressId?: string;
}

/** Inserts the transaction (copying the quote's price) and records its creation: history row and event. */
export async function insertTransaction(unit: Unit, scope: EventScope, input: NewTransaction): Promise<TransactionRow> {
  return (await insertTransactions(unit, scope, [input]))[0];
}

const INSERTED_COLUMNS = ['id', 'business_id', 'environment', 'direction', 'status', 'quote_id', 'external_reference', 'chain', 'currency', 'payment_method', 'exchange_rate',
  'source_amount', 'total_required', 'destination_amount', 'provider_fee', 'platform_fee', 'beneficiary_id', 'wallet_id', 'wallet_address', 'customer_id', 'funding_type',
  'payer_phone_redacted', 'payer_network', 'payment_intent_id', 'payout_batch_id', 'payout_batch_index', 'refund_address', 'liquidation_address_id'];

/**
 * insertTransaction() for several transactions of one scope created in the same status (a payout batch's items): one
 * INSERT and one history statement, the rows in the order given.
 */
export async function insertTransactions(unit: Unit, scope: EventScope, inputs: NewTransaction[]): Promise<TransactionRow[]> {
  if (!inputs.length) return [];
  const status = inputs[0].status;
  if (inputs.some((i) => i.status !== status)) throw new Error('insertTransactions: one status for all');
  const values = inputs.map((input) => {
    const q = input.quote;
    const id = randomUUID();
    const owner = { id, business_id: scope.businessId, environment: scope.environment };
    const sealed = input.payer ? sealedPayerColumns(input.payer.keys, 'transactions', 'payer_phone', owner, input.payer.phone_number) : {};
    const row: unknown[] = [id, scope.businessId, scope.environment, q.direction, input.status, q.id, input.externalReference ?? null, q.chain, q.currency, q.payment_method,
      q.exchange_rate, q.source_amount, q.total_required, q.destination_amount, q.provider_fee, q.platform_fee, q.beneficiary_id, input.wallet?.id ?? null,
      input.wallet?.address ?? input.fundingAddress ?? null, input.wallet?.customer_id ?? input.customerId ?? null, input.fundingType ?? null,
      input.payer ? redactPhone(input.payer.phone_number) : null, input.payer?.mobile_network ?? null, input.paymentIntentId ?? null,
      input.payoutBatch?.id ?? null, input.payoutBatch?.index ?? null, input.refundAddress ?? null, input.liquidationAddressId ?? null];
    return { row, sealed: sealed as Record<string, unknown> };
  });
  const sealedColumns = [...new Set(values.flatMap((v) => Object.keys(v.sealed)))];
  const width = INSERTED_COLUMNS.length + sealedColumns.length;
  const params = values.flatMap((v) => [...v.row, ...sealedColumns.map((c) => v.sealed[c] ?? null)]);
  const tuples = values.map((_, r) => `(${Array.from({ length: width }, (_, i) => `$${r * width + i + 1}`).join(', ')})`);
  let rows: TransactionRow[];
  try {
    const text = `INSERT INTO transactions AS t (${[...INSERTED_COLUMNS, ...sealedColumns].join(', ')}) VALUES ${tuples.join(', ')} RETURNING ${TRANSACTION_COLUMNS}`;
    // One row (every create but a batch's) is prepared; a batch's text has as many tuples as it has items.
    rows = await insertCreated<TransactionStatus, TransactionRow>(unit, TRANSACTION_MACHINE, scope, status, { text, params, prepared: values.length === 1, ids: values.map((v) => v.row[0] as string) }, transactionView);
  } catch (err) {
    if ((err as { code?: string; constraint?: string }).constraint === 'transactions_external_reference_uq' || /transactions_external_reference_uq/.test(String((err as Error).message))) {
      throw new AppError('invalid_state', 'A transaction with this external_reference already exists.', { external_reference: inputs.length === 1 ? inputs[0].externalReference : undefined });
    }
    throw err;
  }
  return rows;
}

/** A wallet as a ramp uses it: what funds an off-ramp, or receives an on-ramp's USDC. */
export interface UsableWallet {
  id: string;
  address: string;
  customer_id: string | null;
  type: string;
  hd_index: number | null;
}

type WalletChecked = UsableWallet & Pick<WalletRow, 'status' | 'ownership_status' | 'chain'>;

/**
 * The columns usableWalletOf checks, read beside another row in the same statement (a quote consumed, an off-ramp
 * locked for its submission): `walletJoin` joins the wallet in that row's business and environment.
 */
export const JOINED_WALLET = joinedColumns<WalletChecked>('wallet', 'w', 'id, status, type, ownership_status, chain, address, customer_id, hd_index');
export const walletJoin = (walletId: string, alias: string) =>
  `LEFT JOIN wallets w ON w.id = ${walletId} AND w.business_id = ${alias}.business_id AND w.environment = ${alias}.environment`;

/** The wallet an off-ramp is funded from, or an on-ramp delivers to: active, and proven if external. */
export async function usableWallet(em: EntityManager, scope: EventScope, walletId: string, chain: Chain): Promise<UsableWallet> {
  const wallet = await findWallet(em, scope, walletId).catch((err: unknown) => {
    if (err instanceof AppError && err.code === 'not_found') return undefined;
    throw err;
  });
  return usableWalletOf(wallet, walletId, chain);
}

/** The same checks on a wallet read already (undefined: none in scope). */
export function usableWalletOf(wallet: WalletChecked | undefined, walletId: string, chain: Chain): UsableWallet {
  if (!wallet) throw new AppError('not_found', 'No such wallet.', { param: 'wallet_id' });
  assertActive(wallet);
  if (wallet.type === 'external_wallet') {
    if (wallet.ownership_status !== 'verified') throw new AppError('wallet_not_verified', 'An external wallet must prove its ownership first.', { wallet_id: walletId });
    if (wallet.chain !== chain) throw AppError.invalid(`The wallet is registered on ${wallet.chain}, not ${chain}.`, [{ path: 'wallet_id', in: 'body', message: `is on ${wallet.chain}` }]);
  }
  return { id: wallet.id, address: wallet.address, customer_id: wallet.customer_id, type: wallet.type, hd_index: wallet.hd_index };
}
