import { randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import { encodeFunctionData, erc20Abi, getAbiItem, toFunctionSelector, type Address, type Hex } from 'viem';
import { AppError } from '../errors.js';
import type { Config } from '../config.js';
import { updateReturning, type Unit } from '../db/unit-of-work.js';
import { walletOf } from '../chain/hd-wallet.js';
import { claimAddress, claimed, claimStart, nextPooled } from '../chain/address-pool.js';
import type { Chain } from './chains.js';
import type { EventScope } from './events.js';
import { formatAmount, fromMinor, toMinor, USDC_SCALE } from './money.js';
import { SETTLEMENT_MACHINE, type SettlementStatus } from './machines.js';
import { insertCreated } from './transition.js';
import { planOnce } from '../db/prepared-client.js';
import { joinedColumns } from '../db/joined-columns.js';

type Queryable = Pick<DataSource | EntityManager, 'query'>;

export interface SettlementRow {
  id: string;
  business_id: string;
  environment: 'sandbox' | 'live';
  transaction_id: string;
  status: SettlementStatus;
  chain: Chain;
  asset: 'USDC';
  token_address: string;
  from_address: string;
  to_address: string;
  hd_index: number;
  fee_address: string;
  amount: string;
  fee_amount: string;
  total_required: string;
  received_amount: string;
  confirmations: number;
  required_confirmations: number;
  transaction_hash: string | null;
  block_number: string | null;
  execution: Record<string, unknown>;
  expires_at: Date;
  detected_at: Date | null;
  confirmed_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `id, business_id, environment, transaction_id, status, chain, asset, token_address, from_address, to_address, hd_index, fee_address,
  amount::text, fee_amount::text, total_required::text, received_amount::text, confirmations, required_confirmations, transaction_hash, block_number::text,
  execution, expires_at, detected_at, confirmed_at, created_at, updated_at`;

/** The settlement's columns read beside its transaction's (`s` joined to it), each named `settlement__<column>`. */
export const JOINED_SETTLEMENT = joinedColumns<SettlementRow>('settlement', 's', COLUMNS);

const usdc = (value: string) => formatAmount(value, USDC_SCALE);
const minor = (value: string) => toMinor(usdc(value), USDC_SCALE);
const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function settlementView(row: SettlementRow): Record<string, unknown> {
  const over = minor(row.received_amount) - minor(row.total_required);
  return {
    id: row.id,
    transaction_id: row.transaction_id,
    status: row.status,
    chain: row.chain,
    asset: row.asset,
    token_address: row.token_address,
    from_address: row.from_address,
    to_address: row.to_address,
    amount: usdc(row.amount),
    fee_address: row.fee_address,
    fee_amount: usdc(row.fee_amount),
    total_required: usdc(row.total_required),
    received_amount: usdc(row.received_amount),
    overpaid_amount: over > 0n ? fromMinor(over, USDC_SCALE) : null,
    confirmations: row.confirmations,
    required_confirmations: row.required_confirmations,
    execution: row.execution,
    transaction_hash: row.transaction_hash,
    expires_at: row.expires_at.toISOString(),
    detected_at: iso(row.detected_at),
    confirmed_at: iso(row.confirmed_at),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export async function settlementOf(q: Queryable, transactionId: string, lock = false): Promise<SettlementRow | undefined> {
  return ((await q.query(planOnce(`SELECT ${COLUMNS} FROM settlements WHERE transaction_id = $1${lock ? ' FOR UPDATE' : ''}`), [transactionId])) as SettlementRow[])[0];
}

/** For jobs, which carry ids only. */
export async function loadSettlement(q: Queryable, id: string): Promise<SettlementRow | undefined> {
  return ((await q.query(planOnce(`SELECT ${COLUMNS} FROM settlements WHERE id = $1`), [id])) as SettlementRow[])[0];
}

export interface NewSettlement {
  transactionId: string;
  chain: Chain;
  fromAddress: string;
  amount: string;
  feeAmount: string;
  totalRequired: string;
  /** The chain head as the address is issued (live), where the watcher's first scan may have to start; null in the sandbox. */
  issuedBlock: bigint | null;
  /** A transfer into a liquidation address: that (shared) address, not a fresh one. */
  liquidationAddress?: { id: string; address: string; hdIndex: number };
}

/**
 * A unique HD-derived deposit address (or the liquidation address the transfer went to) and the ready-to-sign ERC-20
 * transfer of total_required to it.
 */
export async function createSettlement(unit: Unit, config: Config, scope: EventScope, input: NewSettlement): Promise<SettlementRow> {
  const wallet = walletOf(config, scope.environment, 'Live deposit addresses');
  const token = config.chains[input.chain].usdcAddress as Address;
  const total = toMinor(input.totalRequired, USDC_SCALE);
  const id = randomUUID();
  const params = (toAddress: string | null, index: number | null, execution: string | null) => [
    id, scope.businessId, scope.environment, input.transactionId, input.chain, token, input.fromAddress, toAddress, index, wallet.treasuryAddress,
    input.amount, input.feeAmount, input.totalRequired, config.chains[input.chain].confirmations, execution, config.settlementTtlSeconds,
    input.issuedBlock?.toString() ?? null, input.liquidationAddress?.id ?? null,
  ];
  const insert = (values: { text: string; params: unknown[]; with?: string }) =>
    insertCreated<SettlementStatus, SettlementRow>(unit, SETTLEMENT_MACHINE, scope, 'awaiting_transfer', { ...values, prepared: true, ids: [id] }, settlementView);
  if (!input.liquidationAddress) {
    // One statement: a pooled address claimed and the settlement paying to it, its ERC-20 transfer encoded as
    // erc20TransferData() does. An empty pool past the claim's start writes nothing: the fuller path below.
    const start = claimStart(scope.environment, wallet.xpub);
    const [row] = await insert({
      with: `claimed AS (DELETE FROM hd_address_pool WHERE hd_index = (${nextPooled('$3', '$8', '$9::integer')}) RETURNING hd_index, address)`,
      text: `INSERT INTO settlements (id, business_id, environment, transaction_id, status, chain, token_address, from_address, to_address, hd_index, fee_address,
         amount, fee_amount, total_required, required_confirmations, execution, expires_at, issued_block, liquidation_address_id)
       SELECT $1, $2, $3, $4, 'awaiting_transfer', $5, $6, $7, c.address, c.hd_index, $10, $11, $12, $13, $14,
              jsonb_build_object('method', 'erc20_transfer', 'to', $6::text, 'value', '0',
                'data', '${TRANSFER_SELECTOR}' || lpad(lower(substr(c.address, 3)), 64, '0') || $15::text),
              now() + make_interval(secs => $16), $17, $18
         FROM claimed c RETURNING ${COLUMNS}`,
      params: params(start.xpubId, start.from, amountWord(total)),
    });
    if (row) {
      claimed(scope.environment, wallet.xpub, row.hd_index!);
      return row;
    }
  }
  const { index, address: toAddress } = input.liquidationAddress
    ? { index: input.liquidationAddress.hdIndex, address: input.liquidationAddress.address as Address }
    : await claimAddress(unit.em, scope.environment, wallet.xpub);
  const execution = { method: 'erc20_transfer', to: token, data: erc20TransferData(toAddress, total), value: '0' };
  const [row] = await insert({
    text: `INSERT INTO settlements (id, business_id, environment, transaction_id, status, chain, token_address, from_address, to_address, hd_index, fee_address,
       amount, fee_amount, total_required, required_confirmations, execution, expires_at, issued_block, liquidation_address_id)
     VALUES ($1, $2, $3, $4, 'awaiting_transfer', $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, now() + make_interval(secs => $16), $17, $18) RETURNING ${COLUMNS}`,
    params: params(toAddress, index, JSON.stringify(execution)),
  });
  return row;
}

/** transfer(address,uint256)'s selector: the calldata of a settlement's ERC-20 transfer begins with it. */
const TRANSFER_SELECTOR = toFunctionSelector(getAbiItem({ abi: erc20Abi, name: 'transfer' }));

/** The ERC-20 transfer of `amount` (minor units) to `to`, as calldata. */
export function erc20TransferData(to: Address, amount: bigint): Hex {
  return encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, amount] });
}

/** The calldata's last word, the amount, as 64 hex digits (the address's word comes from the claimed row, in SQL). */
function amountWord(amount: bigint): string {
  return erc20TransferData('0x0000000000000000000000000000000000000000', amount).slice(2 + 8 + 64);
}

export interface ObservedTransfer {
  transactionHash: string;
  logIndex: number;
  /** USDC minor units. */
  amount: bigint;
  blockNumber?: bigint | null;
  blockHash?: string | null;
  /** The sender, when known (the chain's log): a managed wallet's own transfer is taken from its ledger balance. */
  from?: string;
}

/**
 * Records a transfer to the deposit address once (a log seen twice is one transfer) and adds it to received_amount;
 * block_number is the newest counted transfer's (the payment is as deep as its last transfer, section 14).
 * `execution`: keys merged into the settlement's execution with it (a managed wallet's send, recorded as it is seen).
 * Answers the settlement as it now stands, and whether this transfer was new.
 */
export async function recordTransfer(
  unit: Unit, settlement: SettlementRow, transfer: ObservedTransfer, execution?: Record<string, unknown>,
): Promise<{ settlement: SettlementRow; isNew: boolean; observation: string | null; transfers?: Transfers }> {
  const amount = fromMinor(transfer.amount, USDC_SCALE);
  // One statement: the transfer, and (only when it is new) the settlement counting it, with `execution`'s keys, and
  // every transfer the settlement now counts (countedTransfers' answer: the statement's own reads do not see its insert).
  const rows = await updateReturning<SettlementRow & { observation: string; transfers: TransferRow[] }>(
    unit.em,
    planOnce(`WITH ins AS (
       INSERT INTO settlement_transfers (settlement_id, transaction_hash, log_index, amount, block_number, block_hash, from_address) VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (settlement_id, transaction_hash, log_index) DO NOTHING RETURNING ${TRANSFER_COLUMNS})
     UPDATE settlements SET received_amount = received_amount + $4, transaction_hash = coalesce(transaction_hash, $2), block_number = GREATEST(block_number, $5),
       detected_at = coalesce(detected_at, now()), execution = execution || $8::jsonb, updated_at = now()
       FROM (SELECT id AS observation FROM ins) i WHERE settlements.id = $1 RETURNING ${COLUMNS}, i.observation,
       (SELECT json_agg(t ORDER BY t.id::bigint) FROM (SELECT ${TRANSFER_COLUMNS} FROM settlement_transfers WHERE settlement_id = $1 UNION ALL SELECT * FROM ins) t) AS transfers`),
    [settlement.id, transfer.transactionHash, transfer.logIndex, amount, transfer.blockNumber?.toString() ?? null, transfer.blockHash ?? null,
      transfer.from?.toLowerCase() ?? null, JSON.stringify(execution ?? {})],
  );
  if (!rows[0]) {
    if (execution) await recordExecution(unit, settlement.id, execution);
    return { settlement, isNew: false, observation: null };
  }
  const { observation, transfers, ...updated } = rows[0];
  return { settlement: updated as SettlementRow, isNew: true, observation, transfers: transfersOf(transfers.map((t) => ({ ...t, observed_at: new Date(t.observed_at) }))) };
}

/** Keys merged into the settlement's `execution` (what its sends recorded). */
async function recordExecution(unit: Unit, settlementId: string, execution: Record<string, unknown>): Promise<void> {
  await unit.em.query(planOnce(`UPDATE settlements SET execution = execution || $2::jsonb, updated_at = now() WHERE id = $1`), [settlementId, JSON.stringify(execution)]);
}

/** A transfer counted on-chain (with its block), as a reorg check reads it. */
export interface CountedTransfer {
  id: string;
  transaction_hash: string;
  log_index: number;
  amount: string;
  block_number: string;
  block_hash: string;
  from_address: string | null;
}

/** A settlement's transfers as a confirmation count needs them (countedTransfers, or recordTransfer's statement). */
export interface Transfers {
  /** The transfers counted on-chain (with their block), as a reorg check reads them. */
  counted: CountedTransfer[];
  /** When the latest transfer to the address was seen, block or not (confirmations count from the one that completed the payment). */
  lastAt: Date | null;
}

type TransferRow = Omit<CountedTransfer, 'block_number' | 'block_hash'> & { block_number: string | null; block_hash: string | null; observed_at: Date };
const TRANSFER_COLUMNS = 'id::text AS id, transaction_hash, log_index, amount::text AS amount, block_number::text AS block_number, block_hash, from_address, observed_at';

function transfersOf(rows: TransferRow[]): Transfers {
  const lastAt = rows.reduce<Date | null>((last, r) => (!last || r.observed_at > last ? r.observed_at : last), null);
  return { counted: rows.filter((r) => r.block_hash !== null).map(({ observed_at: _, ...t }) => t as CountedTransfer), lastAt };
}

/**
 * A settlement's transfers as one JSON column of a read that has the settlement as `alias` (transfersRead() takes them
 * out): a read of the settlement with its transfers is one statement.
 */
export const transfersColumn = (alias: string) =>
  `CASE WHEN (SELECT x.xmin FROM settlements x WHERE x.id = ${alias}.id) = ${alias}.xmin
     THEN coalesce((SELECT json_agg(x ORDER BY x.id::bigint) FROM (SELECT ${TRANSFER_COLUMNS} FROM settlement_transfers WHERE settlement_id = ${alias}.id) x), '[]') END`;

/**
 * The transfers transfersColumn() read beside a locked settlement, or undefined when they must be read again. Under
 * READ COMMITTED a read that waited for the settlement's lock answers the settlement as the unit that held it left it
 * (its latest version), but its transfers as they were when the read began. Every transfer recorded or removed updates
 * its settlement in the same transaction, so the transfers are current exactly when the version the read began with is
 * the one it locked: the column is then the list, else null (read again).
 */
export function transfersRead(json: unknown): Transfers | undefined {
  if (json === null || json === undefined) return undefined;
  return transfersOf((json as (TransferRow & { observed_at: string })[]).map((t) => ({ ...t, observed_at: new Date(t.observed_at) })));
}

/** A settlement's transfers (Transfers), in one query. */
export async function countedTransfers(q: Queryable, settlementId: string): Promise<Transfers> {
  const rows: TransferRow[] = await q.query(planOnce(`SELECT ${TRANSFER_COLUMNS} FROM settlement_transfers WHERE settlement_id = $1 ORDER BY settlement_transfers.id`), [settlementId]);
  return transfersOf(rows);
}

/**
 * The reverse of recordTransfer, for transfers a reorg removed: they leave received_amount, and the settlement's first
 * transfer, block and detection are those of what remains. Answers the settlement as it now stands.
 */
export async function uncountTransfers(unit: Unit, settlement: SettlementRow, removed: CountedTransfer[]): Promise<SettlementRow> {
  // What the delete took, not what the caller listed: a transfer already removed by another unit is not uncounted twice.
  const taken = await updateReturning<{ amount: string }>(unit.em,
    `DELETE FROM settlement_transfers WHERE settlement_id = $1 AND id = ANY($2::bigint[]) RETURNING amount::text AS amount`, [settlement.id, removed.map((t) => t.id)]);
  const total = taken.reduce((sum, t) => sum + toMinor(t.amount, USDC_SCALE), 0n);
  const rows = await updateReturning<SettlementRow>(unit.em,
    `UPDATE settlements s SET received_amount = received_amount - $2, confirmations = 0,
       transaction_hash = (SELECT transaction_hash FROM settlement_transfers WHERE settlement_id = s.id ORDER BY id LIMIT 1),
       block_number = (SELECT max(block_number) FROM settlement_transfers WHERE settlement_id = s.id),
       detected_at = CASE WHEN EXISTS (SELECT 1 FROM settlement_transfers WHERE settlement_id = s.id) THEN detected_at END, updated_at = now()
     WHERE id = $1 RETURNING ${COLUMNS}`,
    [settlement.id, fromMinor(total, USDC_SCALE)],
  );
  return rows[0];
}

export async function setConfirmations(unit: Unit, row: SettlementRow, confirmations: number): Promise<void> {
  const counted = Math.min(confirmations, row.required_confirmations);
  // `row` is locked in this unit as it stands: no more than it holds writes nothing, so nothing is sent.
  if (counted <= row.confirmations) return;
  await unit.em.query(planOnce(`UPDATE settlements SET confirmations = $2, updated_at = now() WHERE id = $1 AND confirmations < $2`), [row.id, counted]);
}

