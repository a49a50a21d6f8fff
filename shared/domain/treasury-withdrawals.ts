import type { DataSource, EntityManager } from 'typeorm';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import { inUnit, type Unit, type UnitDeps } from '../db/unit-of-work.js';
import { findScoped } from '../db/pagination.js';
import type { JobRequest } from '../queues/producer.js';
import { jobId } from '../queues/registry.js';
import { chainFor } from '../chain/sandbox-chain.js';
import type { Chain } from './chains.js';
import type { EventScope } from './events.js';
import { InsufficientFundsError } from './ledger.js';
import { apply } from '../kernel/apply.js';
import { TREASURY_WITHDRAWAL_MACHINE, type TreasuryWithdrawalStatus } from './machines.js';
import { decideWithdrawal, withdrawalCreated, type WithdrawalFact, type WithdrawalSnapshot } from '../kernel/withdrawals.js';
import { decideIn, type Flow } from '../kernel/run.js';
import { AmountError, formatAmount, fromMinor, toMinor, USDC_SCALE } from './money.js';
import { insertCreated } from './transition.js';
import { assertActive, findWallet, resolveChain } from './wallets.js';

// Treasury withdrawals (CONTRACT section 14): treasury USDC sent to a verified external wallet of the business. The
// treasury is debited when the withdrawal is written (pending, into the clearing account), so two withdrawals never
// spend the same USDC; the send then completes it (live: the hot wallet's once-only chain.send; sandbox: the wallet's
// simulated balance) or fails it, and the amount goes back to the treasury's available balance.

type Queryable = Pick<DataSource | EntityManager, 'query'>;

export interface WithdrawalRow {
  id: string;
  business_id: string;
  environment: 'sandbox' | 'live';
  wallet_id: string;
  chain: Chain;
  to_address: string;
  amount: string;
  status: TreasuryWithdrawalStatus;
  transaction_hash: string | null;
  external_reference: string | null;
  failure: { code: string; message: string } | null;
  created_at: Date;
  updated_at: Date;
  send_staged_at: Date | null;
}

export const WITHDRAWAL_COLUMNS = `w.id, w.business_id, w.environment, w.wallet_id, w.chain, w.to_address, w.amount::text, w.status, w.transaction_hash,
  w.external_reference, w.failure, w.created_at, w.updated_at, w.send_staged_at`;

const scopeOf = (row: WithdrawalRow): EventScope => ({ businessId: row.business_id, environment: row.environment });
const minor = (value: string) => toMinor(formatAmount(value, USDC_SCALE), USDC_SCALE);

export function withdrawalView(row: WithdrawalRow): Record<string, unknown> {
  return {
    id: row.id,
    wallet_id: row.wallet_id,
    chain: row.chain,
    amount: formatAmount(row.amount, USDC_SCALE),
    status: row.status,
    transaction_hash: row.transaction_hash,
    external_reference: row.external_reference,
    failure: row.failure,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export function findWithdrawal(q: Queryable, scope: EventScope, id: string): Promise<WithdrawalRow> {
  return findScoped(q, { from: 'treasury_withdrawals w', columns: WITHDRAWAL_COLUMNS, resource: 'treasury withdrawal' }, scope, id);
}

export async function loadWithdrawal(q: Queryable, id: string, lock = false): Promise<WithdrawalRow | undefined> {
  return ((await q.query(`SELECT ${WITHDRAWAL_COLUMNS} FROM treasury_withdrawals w WHERE w.id = $1${lock ? ' FOR UPDATE' : ''}`, [id])) as WithdrawalRow[])[0];
}

export const withdrawalJobs = {
  send: (withdrawalId: string, delayMs = 0): JobRequest<'withdrawal.send'> => ({ name: 'withdrawal.send', id: jobId('withdrawal.send', withdrawalId), data: { withdrawalId }, delayMs }),
};

/** The snapshot the kernel decides on, from the row (locked by the caller). */
function snapshotOf(row: WithdrawalRow): WithdrawalSnapshot {
  return { id: row.id, scope: scopeOf(row), status: row.status, walletId: row.wallet_id, chain: row.chain, amount: minor(row.amount), transactionHash: row.transaction_hash, sendStaged: row.send_staged_at !== null };
}

/** The withdrawal flow: a fact about a withdrawal is decided on its locked row (kernel/withdrawals.ts). */
const WITHDRAWAL_FLOW: Flow<WithdrawalSnapshot, WithdrawalFact> = {
  load: async (unit, id) => {
    const row = await loadWithdrawal(unit.em, id, true);
    return row && snapshotOf(row);
  },
  decide: decideWithdrawal,
  views: new Map([[TREASURY_WITHDRAWAL_MACHINE, withdrawalView]]),
};

export interface CreateWithdrawalInput {
  wallet_id: string;
  chain?: Chain;
  amount: string;
  external_reference?: string;
}

function parseAmount(amount: string): bigint {
  let value: bigint;
  try {
    value = toMinor(amount, USDC_SCALE);
  } catch (err) {
    if (err instanceof AmountError) throw AppError.invalid(`amount must be a USDC amount with at most ${USDC_SCALE} decimals.`, [{ path: 'amount', in: 'body', message: err.message }]);
    throw err;
  }
  if (value <= 0n) throw AppError.invalid('amount must be more than zero.', [{ path: 'amount', in: 'body', message: 'must be more than zero' }]);
  return value;
}

/**
 * POST /treasury/withdrawals: to an active, verified external wallet of the business (404 another's, 422 unverified),
 * debiting the treasury at once (409 insufficient_funds when short: the whole unit rolls back, nothing changes).
 */
export async function createWithdrawal(unit: Unit, config: Config, scope: EventScope, id: string, input: CreateWithdrawalInput): Promise<WithdrawalRow> {
  const amount = parseAmount(input.amount);
  const wallet = await findWallet(unit.em, scope, input.wallet_id, 'share');
  assertActive(wallet);
  if (wallet.type !== 'external_wallet' || wallet.ownership_status !== 'verified') {
    throw new AppError('wallet_not_verified', 'Withdrawals go to an external wallet whose ownership is proven; verify it first.', { wallet_id: wallet.id });
  }
  const chain = resolveChain(wallet, input.chain, 'body');
  chainFor(scope.environment, config); // live without its chain configured: 503 before anything is written
  const [row] = await insertCreated<TreasuryWithdrawalStatus, WithdrawalRow>(unit, TREASURY_WITHDRAWAL_MACHINE, scope, 'pending', {
    text: `INSERT INTO treasury_withdrawals AS w (id, business_id, environment, wallet_id, chain, to_address, amount, status, external_reference)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8) RETURNING ${WITHDRAWAL_COLUMNS}`,
    params: [id, scope.businessId, scope.environment, wallet.id, chain, wallet.address, fromMinor(amount, USDC_SCALE), input.external_reference ?? null],
    prepared: true,
    ids: [id],
  }, withdrawalView);
  try {
    await apply(unit, withdrawalCreated(snapshotOf(row), withdrawalJobs.send(id, scope.environment === 'sandbox' ? config.sandboxStepMs : 0)), new Map());
  } catch (err) {
    if (!(err instanceof InsufficientFundsError)) throw err;
    throw new AppError('insufficient_funds', `The treasury holds ${fromMinor(err.available, USDC_SCALE)} USDC available, less than the ${fromMinor(amount, USDC_SCALE)} asked for.`, {
      available: fromMinor(err.available, USDC_SCALE), required: fromMinor(amount, USDC_SCALE),
    });
  }
  return row;
}

/**
 * The withdrawal.send job: a wallet archived meanwhile fails it; otherwise the chain sends (sandbox: at once, and it
 * completes here; live: the hot wallet's chain.send is staged, named by the withdrawal, and completes it once mined).
 */
export async function sendWithdrawal(deps: UnitDeps, config: Config, withdrawalId: string): Promise<string> {
  return inUnit(deps, async (unit) => {
    const row = await loadWithdrawal(unit.em, withdrawalId, true);
    if (!row || row.status !== 'pending') return `not pending (${row?.status ?? 'gone'})`;
    const [wallet]: { status: string }[] = await unit.em.query(`SELECT status FROM wallets WHERE id = $1`, [row.wallet_id]);
    if (wallet.status !== 'active') return decideIn(unit, WITHDRAWAL_FLOW, row.id, { kind: 'wallet_archived' });
    const sent = await chainFor(row.environment, config).withdraw(unit, scopeOf(row), {
      reference: row.id, withdrawalId: row.id, chain: row.chain, amount: minor(row.amount), to: row.to_address,
    });
    if (sent) return decideIn(unit, WITHDRAWAL_FLOW, row.id, { kind: 'sent', hash: sent.hash });
    await unit.em.query(`UPDATE treasury_withdrawals SET send_staged_at = now() WHERE id = $1 AND send_staged_at IS NULL`, [row.id]);
    return 'sending';
  });
}

/** The hot wallet's send of a withdrawal was mined (chain.send): it completes, once. */
export function withdrawalSent(unit: Unit, withdrawalId: string, hash: string): Promise<string> {
  return decideIn(unit, WITHDRAWAL_FLOW, withdrawalId, { kind: 'sent', hash });
}

/** The hot wallet's send reverted on chain: nothing moved, so the withdrawal fails and its amount is returned. */
export function withdrawalReverted(unit: Unit, withdrawalId: string, message: string): Promise<string> {
  return decideIn(unit, WITHDRAWAL_FLOW, withdrawalId, { kind: 'reverted', message });
}
