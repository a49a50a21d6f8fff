import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import { inUnit, updateReturning, type Unit } from '../db/unit-of-work.js';
import type { ChainAdapter, ChainDeps, SentTransfer } from '../chain/adapter.js';
import { chainFor } from '../chain/sandbox-chain.js';
import { ChainFundsError, InsufficientGasError } from '../chain/sender.js';
import { rewindCursor } from '../chain/cursor.js';
import type { EventScope } from './events.js';
import type { Environment } from './chains.js';
import { fromMinor, toMinor, USDC_SCALE } from './money.js';
import { AUTO_REFUND_CODES, refundAddressOf, scheduleAutoRefund, scheduleExcessReturn } from './refunds.js';
import { confirmPollDelay, stepDelay, sweepJob, txJobs } from './lifecycle-jobs.js';
import {
  countedTransfers, createSettlement, JOINED_SETTLEMENT, transfersColumn, transfersRead, type Transfers, uncountTransfers, type CountedTransfer, recordTransfer, setConfirmations, settlementOf, settlementView, type ObservedTransfer, type SettlementRow,
} from './settlements.js';
import {
  consumeQuote, insertTransaction, JOINED_WALLET, loadTransaction, lockTransaction, scopeOf, TRANSACTION_COLUMNS, transactionView, usableWallet, usableWalletOf, walletJoin,
  type TransactionRow,
} from './transactions.js';
import { TRANSACTION_VIEWS } from './transaction-moves.js';
import { walletUsdcAccount } from './wallet-balances.js';
import { assertProvider } from '../providers/providers.js';
import { issuedBlock, paymentDepth, type PaymentDepth } from './confirmations.js';
import { payOrReturn } from './liquidation-returns.js';
import { planOnce } from '../db/prepared-client.js';
import { decideSubmission, type SubmissionDecision, type SubmissionFact } from '../kernel/submission.js';
import { apply, StalePlanError } from '../kernel/apply.js';
import { isEmpty, nothing } from '../kernel/plan.js';
import { depositReference, reversalReference } from '../kernel/inflow-entries.js';
import type { Hex } from 'viem';
import { COUNT_NOW, LATE_EXCESS, LATE_REASON, type SettlementFact } from '../kernel/settlements.js';
import { autoRefundOf, decideSettlementIn, type HeldSettlement } from './settlement-flow.js';

export interface StartOfframpInput {
  quote_id: string;
  funding_source: { wallet_id: string };
  external_reference?: string;
  refund_address?: string;
}

// The refund step lives beside the refund request (refunds.ts); the payout steps that refund import it from here.
export { completeRefund, refundEntry, refundOfframp } from './refunds.js';

const minor = (value: string) => toMinor(value, USDC_SCALE);
const usdc = (value: bigint) => fromMinor(value, USDC_SCALE);

/**
 * Consumes the quote, creates the transaction (`created`) and its settlement (`awaiting_transfer`, a fresh deposit
 * address), and stages what comes next: the expiry check, and for a managed wallet the platform's own transfer.
 */
export async function startOfframp(unit: Unit, config: Config, scope: EventScope, input: StartOfframpInput): Promise<{ transaction: TransactionRow; settlement: SettlementRow }> {
  const { quote, wallet: funding } = await consumeQuote(unit, scope, input.quote_id, 'offramp', input.funding_source.wallet_id);
  assertProvider(scope.environment, { db: unit.em, config }, quote.currency, quote.payment_method);
  const wallet = usableWalletOf(funding, input.funding_source.wallet_id, quote.chain);
  // Archived since the quote was priced: no new payout to it (one already under way still completes).
  if (quote.beneficiary_status !== 'active') throw new AppError('resource_archived', 'This quote\'s beneficiary is archived and cannot be paid.', { beneficiary_id: quote.beneficiary_id });
  const fundingType = wallet.type === 'managed_wallet' ? 'managed_wallet' : 'external_wallet';
  const refundAddress = input.refund_address === undefined ? null : refundAddressOf(input.refund_address, fundingType);
  const transaction = await insertTransaction(unit, scope, { quote, wallet, status: 'created', externalReference: input.external_reference, fundingType, refundAddress });
  const fees = minor(quote.provider_fee!) + minor(quote.platform_fee!);
  const settlement = await createSettlement(unit, config, scope, {
    transactionId: transaction.id, chain: quote.chain, fromAddress: wallet.address, amount: quote.source_amount!, feeAmount: usdc(fees), totalRequired: quote.total_required!,
    issuedBlock: await issuedBlock(config, scope, quote.chain),
  });
  if (fundingType === 'managed_wallet') await unit.stage(txJobs.submit(transaction, stepDelay(config, scope.environment)), scope);
  return { transaction, settlement };
}

/**
 * Managed wallet: created -> signing, the transfer sent through the chain adapter (the sandbox debits the wallet's
 * simulated balance; live signs, sends once and waits for it to be mined, outside any unit of work), then
 * signing -> submitting and the transfer observed like any other, in one unit. Not enough USDC: action_required
 * `insufficient_funds`; not enough gas and no top-up: `insufficient_gas`; both retryable, and a retry resumes at
 * `signing`, where the adapter finds the transfer already sent (its reference) rather than sending it twice. Where
 * the adapter sends in a unit of work (the sandbox), all of it is one unit: it commits whole or not at all.
 */
export async function submitOfframp(deps: ChainDeps, chainOf: (environment: Environment) => ChainAdapter, transactionId: string): Promise<string> {
  // Read with its settlement and its wallet as the first unit's first statement, both locked (a job reads nothing
  // before it): its environment names the chain.
  let tx: TransactionRow | undefined;
  try {
    const first = await inUnit(deps, async (unit) => {
      const read = await lockSettled(unit, transactionId, { wallet: true });
      if (!read) return { outcome: 'gone' };
      const { tx: row, settlement } = read;
      tx = row;
      const chain = chainOf(row.environment);
      const taken = await decideSubmissionStep(unit, row, { kind: 'take', inUnit: Boolean(chain.sendInUnit) });
      if (!taken.decided.submits) return { outcome: taken.decided.outcome };
      if (!chain.sendInUnit) return { chain };
      const wallet = usableWalletOf(read.wallet, row.wallet_id!, row.chain);
      // The debit follows the compare-and-set to submitting this unit made; a row already submitting was debited with its move.
      const sent = taken.decided.debits ? await chain.sendInUnit(unit, scopeOf(row), sendRequest(row, settlement, wallet)) : submittedOf(settlement);
      if (!sent) return { outcome: 'submitting with no recorded send' };
      return { outcome: await recordSubmission(unit, deps.config, chain, taken.row, settlement, sent, wallet.address) };
    });
    if (!first.chain) return first.outcome!;
    // Live: the send goes to the chain and is waited for outside any unit of work.
    const { chain } = first;
    const row = tx!;
    const settlement = (await settlementOf(deps.ds, row.id))!;
    const wallet = await usableWallet(deps.ds.manager, scopeOf(row), row.wallet_id!, row.chain);
    const sent = await chain.sendFromManagedWallet(deps, scopeOf(row), sendRequest(row, settlement, wallet));
    return await inUnit(deps, async (unit) => {
      // Both locked in one statement, in the order every unit of an off-ramp's settlement takes them (lockSettled).
      const now = (await lockSettled(unit, row.id))!;
      return recordSubmission(unit, deps.config, chain, now.tx, now.settlement, sent, wallet.address);
    });
  } catch (err) {
    const failure = sendFailure(err);
    if (!failure || !tx) throw err;
    // Still created when the send was refused in the unit that would have moved it (the sandbox): through signing to
    // action_required, as a send refused after its own move to signing, so a retry resumes at signing either way.
    await inUnit(deps, (unit) => takeSubmissionStep(unit, tx!, { kind: 'refused', failure }));
    return failure.code;
  }
}

/**
 * The row read again under its lock, and the moves decideSubmission (shared/kernel/submission.ts) names for its
 * status, carried out by apply(), each a compare-and-set: a stale job acting on a row that moved on meanwhile moves
 * and sends nothing.
 */
async function takeSubmissionStep(unit: Unit, tx: TransactionRow, fact: SubmissionFact): Promise<{ row: TransactionRow; decided: SubmissionDecision }> {
  const row = await lockTransaction(unit, tx.id);
  if (!row) return { row: tx, decided: { outcome: 'gone', plan: nothing(scopeOf(tx), 'gone'), submits: false, debits: false } };
  return decideSubmissionStep(unit, row, fact);
}

/** The same, for a row its caller has just read locked in this unit. */
async function decideSubmissionStep(unit: Unit, row: TransactionRow, fact: SubmissionFact): Promise<{ row: TransactionRow; decided: SubmissionDecision }> {
  const decided = decideSubmission({ id: row.id, scope: scopeOf(row), status: row.status }, fact);
  const moved = await apply(unit, decided.plan, TRANSACTION_VIEWS);
  return { row: (moved.get(row.id) as unknown as TransactionRow | undefined) ?? row, decided };
}

/** The sandbox's send recorded on the settlement by the unit that moved the off-ramp to submitting. */
function submittedOf(settlement: SettlementRow): SentTransfer | null {
  const submitted = settlement.execution.submitted as { transaction_hash: Hex; nonce: number } | undefined;
  return submitted ? { hash: submitted.transaction_hash, nonce: submitted.nonce, logIndex: 0, blockNumber: null, blockHash: null } : null;
}

function sendRequest(tx: TransactionRow, settlement: SettlementRow, wallet: { id: string; hd_index: number | null }) {
  return { reference: tx.id, chain: tx.chain, amount: minor(settlement.total_required), to: settlement.to_address, walletId: wallet.id, hdIndex: wallet.hd_index ?? 0 };
}

/**
 * The sent transfer, in the caller's unit: signing -> submitting (decideSubmission's `sent`, carried out by apply()),
 * its hash on the settlement, the transfer observed. `tx` and `locked` are locked by the caller in this unit.
 */
async function recordSubmission(
  unit: Unit, config: Config, chain: ChainAdapter, tx: TransactionRow, locked: SettlementRow, sent: SentTransfer, from: string,
): Promise<string> {
  const decided = decideSubmission({ id: tx.id, scope: scopeOf(tx), status: tx.status }, { kind: 'sent' });
  if (!decided.submits) return decided.outcome;
  let now = tx;
  if (!isEmpty(decided.plan)) {
    // Live, the send took place outside any unit: a row that moved on meanwhile is left where it is (nothing written).
    const moved = await apply(unit, decided.plan, TRANSACTION_VIEWS).catch((err: unknown) => {
      if (err instanceof StalePlanError) return null;
      throw err;
    });
    if (!moved) return 'moved on';
    now = moved.get(tx.id) as unknown as TransactionRow;
  }
  // The send's hash and nonce on the settlement, written with the transfer it made.
  await observeTransfer(unit, config, locked, {
    transactionHash: sent.hash, logIndex: sent.logIndex, amount: minor(locked.total_required), blockNumber: sent.blockNumber, blockHash: sent.blockHash, from,
  }, now, chain, { submitted: { transaction_hash: sent.hash, nonce: sent.nonce } });
  return 'submitted';
}

/** Why a managed wallet could not send, as the transaction's failure (null: an error the job retries). */
function sendFailure(err: unknown): { code: string; message: string; details: Record<string, string> } | null {
  if (err instanceof ChainFundsError) {
    return { code: 'insufficient_funds', message: 'The managed wallet holds too little USDC; fund it and retry.', details: { available: usdc(err.available), required: usdc(err.required) } };
  }
  if (err instanceof InsufficientGasError) {
    return {
      code: 'insufficient_gas',
      message: 'The managed wallet holds too little native gas to send, and the treasury hot wallet could not top it up; add gas and retry.',
      details: { balance_wei: err.balance.toString(), required_wei: err.required.toString() },
    };
  }
  return null;
}

/**
 * A transfer to the deposit address (the sandbox control, the chain watcher, or our own submission): recorded once,
 * then decided by the kernel (settlements.ts `transferCounted`). Paid in full, the settlement starts confirming and the
 * transaction awaits its funds; less stays awaiting_transfer; after the settlement closed, a late deposit.
 * `current`: the transaction, locked by the caller in this unit as it is now, with `settlement` locked too (neither is
 * read again); without it both are read and locked by the decision's loader. `execution`: keys recorded on the
 * settlement with the transfer (recordTransfer).
 */
export async function observeTransfer(
  unit: Unit,
  config: Config,
  settlement: SettlementRow,
  transfer: ObservedTransfer,
  current?: TransactionRow,
  chain?: ChainAdapter,
  execution?: Record<string, unknown>,
): Promise<SettlementRow> {
  const { settlement: updated, isNew, observation, transfers } = await recordTransfer(unit, settlement, transfer, execution);
  const tx = current ?? (await loadTransaction(unit.em, updated.transaction_id))!;
  const deposit = isNew && (chain ?? chainFor(settlement.environment, config)).live ? depositEntry(updated, tx, transfer, observation!) : null;
  // The transfers recordTransfer's statement read are all there are where the caller locked the settlement before it
  // (`current`): none can be recorded meanwhile. With the chain at hand, they are counted now, before the decision, so
  // the move to confirming records what the chain shows (the count below then writes nothing more).
  const known = current && transfers;
  const depth = chain && known ? await paymentDepth(chain, updated.chain, known.counted, updated.required_confirmations, known.lastAt) : undefined;
  const { outcome, moved } = await decideSettlementIn(unit, tx.id, {
    kind: 'transfer_counted', isNew, deposit, countNow: !!chain, next: txJobs.confirm(tx, 1, stepDelay(config, tx.environment)), autoRefund: autoRefundOf(config, tx.id),
    ...(depth?.state === 'counted' ? { confirmations: depth.confirmations } : {}),
  }, current && { settlement: updated, tx: current });
  if (outcome === LATE_EXCESS) await scheduleExcessReturn(unit, tx);
  else if (outcome === LATE_REASON) await lateDepositReason(unit, config, updated, tx);
  // With the chain at hand, count at once (a transfer may already be deep enough); else the confirmation job does.
  else if (outcome === COUNT_NOW) {
    // Both rows as the decision left them, locked by its loader or by the caller.
    const now = { settlement: (moved.get(updated.id) as unknown as SettlementRow | undefined) ?? updated, tx: moved.get(tx.id) as unknown as TransactionRow };
    // Otherwise (no `current`) one recorded concurrently may be missing: they are read, and counted, again.
    await countConfirmations(unit, config, chain!, now.tx, now.settlement, 0, now, known, depth);
  }
  return updated;
}

/**
 * Live: an observed transfer moves USDC into the settlement's clearing account, from the managed wallet that sent it
 * (so its ledger balance follows the chain) or from outside (inbound clearing). The sandbox posts when it sends.
 */
function depositEntry(settlement: SettlementRow, tx: TransactionRow, transfer: ObservedTransfer, observation: string) {
  const fromWallet = tx.funding_type === 'managed_wallet' && transfer.from?.toLowerCase() === settlement.from_address.toLowerCase();
  return {
    kind: 'offramp_deposit',
    // Per counting: a transfer a reorg removed and counted again (in a new block, or the same one restored) posts again.
    reference: depositReference({ settlementId: settlement.id, transactionHash: transfer.transactionHash, logIndex: transfer.logIndex, observation }),
    metadata: { transaction_id: tx.id, settlement_id: settlement.id, transaction_hash: transfer.transactionHash, log_index: transfer.logIndex },
    postings: [
      { account: fromWallet ? walletUsdcAccount(tx.wallet_id!, tx.chain) : { kind: 'inbound_clearing' as const, asset: 'USDC' }, amount: -transfer.amount },
      { account: { kind: 'settlement_clearing' as const, asset: 'USDC' }, amount: transfer.amount },
    ],
  };
}

/**
 * A late deposit to an off-ramp already waiting on the business: the reason it waits is now the late deposit (its
 * automatic refund deadline kept, if it has one), announced like a status change so webhook consumers see what the
 * business must do now. The kernel's plan moves no status here (LATE_REASON); this rewrites the reason.
 */
async function lateDepositReason(unit: Unit, config: Config, settlement: SettlementRow, tx: TransactionRow): Promise<void> {
  const view = settlementView(settlement);
  const failure = {
    code: 'late_deposit',
    message: 'A transfer arrived after the settlement closed.',
    details: { received_amount: view.received_amount, total_required: view.total_required },
  };
  const due = AUTO_REFUND_CODES.includes(tx.failure?.code ?? '') && tx.refund_due_at ? tx.refund_due_at : (await scheduleAutoRefund(unit, config, tx)).refund_due_at;
  const rows = await updateReturning<TransactionRow>(unit.em, `UPDATE transactions SET failure = $2, refund_due_at = $3, updated_at = now() WHERE id = $1 RETURNING *`, [
    tx.id, JSON.stringify(failure), due,
  ]);
  unit.event(scopeOf(tx), 'transaction.action_required', transactionView(rows[0]));
}

/** Confirmations counted from the chain; at the required number the settlement is confirmed and the payout starts. */
export async function confirmSettlement(
  unit: Unit, config: Config, chainOf: (environment: Environment) => ChainAdapter, transactionId: string, round: number,
): Promise<string> {
  // The settlement and its transaction, both locked, read together as the unit's first statement: the decision reads
  // neither again, and the job reads nothing before it.
  // Its transfers too: counting reads them again only when one was recorded while this read waited for the lock.
  const read = await lockSettled(unit, transactionId, { transfers: true });
  if (!read) return 'gone';
  const { settlement, tx: locked } = read;
  if (settlement.status !== 'confirming') return `settlement ${settlement.status}`;
  if (locked.status !== 'awaiting_funds') return `not awaiting funds (${locked.status})`;
  return countConfirmations(unit, config, chainOf(locked.environment), locked, settlement, round, { settlement, tx: locked }, read.transfers);
}

/**
 * An off-ramp's transaction and its settlement in one statement, the settlement locked as its loader locks it (FOR
 * UPDATE) and the transaction as its moves do (FOR NO KEY UPDATE); `wallet`: the wallet it is funded from too (not
 * locked), as usableWalletOf checks it; `transfers`: the settlement's transfers (transfersRead: undefined when they
 * must be read again). Undefined: no such transaction, or no settlement.
 */
async function lockSettled(
  unit: Unit, transactionId: string, also: { wallet?: boolean; transfers?: boolean } = {},
): Promise<{ tx: TransactionRow; settlement: SettlementRow; wallet?: ReturnType<typeof JOINED_WALLET.take>; transfers?: Transfers } | undefined> {
  const [row]: Record<string, unknown>[] = await unit.em.query(
    planOnce(`SELECT ${TRANSACTION_COLUMNS}, ${JOINED_SETTLEMENT.select}${also.wallet ? `, ${JOINED_WALLET.select}` : ''}${also.transfers ? `, ${transfersColumn('s')} AS settled_transfers` : ''}
       FROM settlements s JOIN transactions t ON t.id = s.transaction_id${also.wallet ? ` ${walletJoin('t.wallet_id', 't')}` : ''}
      WHERE s.transaction_id = $1 FOR UPDATE OF s FOR NO KEY UPDATE OF t`),
    [transactionId],
  );
  if (!row) return undefined;
  const settlement = JOINED_SETTLEMENT.take(row)!;
  const { settled_transfers: transfers, ...rest } = JOINED_SETTLEMENT.strip<Record<string, unknown>>(row);
  return {
    tx: (also.wallet ? JOINED_WALLET.strip<TransactionRow>(rest) : rest) as TransactionRow,
    settlement,
    ...(also.wallet ? { wallet: JOINED_WALLET.take(rest) } : {}),
    ...(also.transfers ? { transfers: transfersRead(transfers) } : {}),
  };
}

/**
 * Counts now (paymentDepth: every counted transfer still canonical, confirmations from the newest one), outside the
 * decision; the kernel decides what the count means: deep enough, confirmed and funded (the payout started here, in
 * the same unit, by payOrReturn); else (or when the chain cannot be read) another check a step later.
 */
async function countConfirmations(
  unit: Unit, config: Config, chain: ChainAdapter, tx: TransactionRow, settlement: SettlementRow, round: number, held: HeldSettlement, known?: Transfers,
  counted?: PaymentDepth<CountedTransfer>,
): Promise<string> {
  // `known`: what the statement that recorded a transfer in this unit, or that locked the settlement, answered;
  // `counted`: what the chain showed of them, read already in this unit.
  const transfers = known ?? (await countedTransfers(unit.em, settlement.id));
  const depth = (known && counted) || (await paymentDepth(chain, settlement.chain, transfers.counted, settlement.required_confirmations, transfers.lastAt));
  if (depth.state === 'reorged') return rollBack(unit, config, tx, settlement, depth.removed, round);
  const next = (delayMs: number) => txJobs.confirm(tx, round + 1, Math.max(confirmPollDelay(config, tx.environment), delayMs));
  let fact: SettlementFact;
  if (depth.state === 'unknown') fact = { kind: 'depth_unknown', reason: depth.reason, next: next(0) };
  else {
    // What the chain showed is recorded as it is read; the decision says what it means.
    if (!depth.deep) await setConfirmations(unit, settlement, depth.confirmations);
    const sweep = chain.live ? sweepJob('settlement', settlement.id, minor(settlement.received_amount).toString()) : null;
    fact = { kind: 'depth_counted', confirmations: depth.confirmations, deep: depth.deep, next: next(depth.nextCheckMs), sweep };
  }
  const { outcome, moved } = await decideSettlementIn(unit, tx.id, fact, held);
  const funded = moved.get(tx.id) as TransactionRow | undefined;
  if (funded) await payOrReturn(unit, config, chain, funded);
  return outcome;
}

/**
 * A reorg removed counted transfers: what the chain showed is recorded first (they are uncounted, and the watcher's
 * cursor goes back to the first removed block, so a transfer mined again in the new chain is found again); the kernel
 * then reverses their ledger entries and, for a settlement no longer paid in full, moves it back to awaiting_transfer
 * and its transaction to created, each with its event.
 */
async function rollBack(unit: Unit, config: Config, tx: TransactionRow, settlement: SettlementRow, removed: CountedTransfer[], round: number): Promise<string> {
  await uncountTransfers(unit, settlement, removed);
  await rewindCursor(unit.em, tx.environment, tx.chain, removed.reduce((min, t) => (BigInt(t.block_number) < min ? BigInt(t.block_number) : min), BigInt(removed[0].block_number)));
  const reversals = removed.map((t) => {
    // The entry its observation made (depositEntry, from the same facts), reversed.
    const counted = { transactionHash: t.transaction_hash, logIndex: t.log_index, amount: minor(t.amount), blockHash: t.block_hash, from: t.from_address ?? undefined };
    const entry = depositEntry(settlement, tx, counted, t.id);
    return {
      kind: 'offramp_deposit_reorg',
      reference: reversalReference({ settlementId: settlement.id, transactionHash: t.transaction_hash, logIndex: t.log_index, observation: t.id }),
      metadata: { ...entry.metadata, block_number: t.block_number, block_hash: t.block_hash },
      postings: entry.postings.map((p) => ({ ...p, amount: -p.amount })),
    };
  });
  const delay = confirmPollDelay(config, tx.environment);
  // Like a retry, a step taken again: its jobs are new facts with their own ids. A managed wallet's own transfer: its
  // submit step runs again, finds the send and waits for it to be mined anew.
  const submit = tx.funding_type === 'managed_wallet' ? txJobs.submit({ ...tx, retry_count: tx.retry_count + 1 }, delay) : null;
  return (await decideSettlementIn(unit, tx.id, { kind: 'reorged', reversals, next: txJobs.confirm(tx, round + 1, delay), submit })).outcome;
}

/**
 * At expires_at: the expiry tick decided by the kernel (settlements.ts `expire`); the settlement and then its
 * transaction are locked and read again, so a submit step that moved it meanwhile is seen.
 */
export async function expireSettlement(unit: Unit, config: Config, seen: TransactionRow): Promise<string> {
  return (await decideSettlementIn(unit, seen.id, { kind: 'expiry_tick', autoRefund: autoRefundOf(config, seen.id) })).outcome;
}

/** The payout happened: the deposit leaves the clearing account for the provider, the platform keeps its fee. */
export function payoutEntry(tx: TransactionRow) {
  const total = minor(tx.total_required);
  const platform = minor(tx.platform_fee);
  return {
    kind: 'offramp_payout',
    reference: `payout-${tx.id}`,
    metadata: { transaction_id: tx.id },
    postings: [
      { account: { kind: 'settlement_clearing' as const, asset: 'USDC' }, amount: -total },
      { account: { kind: 'provider_clearing' as const, asset: 'USDC' }, amount: total - platform },
      ...(platform > 0n ? [{ account: { kind: 'platform_fees' as const, asset: 'USDC' }, amount: platform }] : []),
    ],
  };
}
