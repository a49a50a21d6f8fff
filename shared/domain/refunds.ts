import { AppError } from '../errors.js';
import type { Unit } from '../db/unit-of-work.js';
import type { ChainAdapter } from '../chain/adapter.js';
import { checksumAddress } from '../chain/address.js';
import type { EventScope } from './events.js';
import type { EntryInput, LedgerAccount } from './ledger.js';
import { fromMinor, toMinor, USDC_SCALE } from './money.js';
import { settlementOf, type SettlementRow } from './settlements.js';
import { closeSettlement } from './settlement-flow.js';
import { findTransaction, loadTransaction, refundOf, scopeOf, type RefundState, type TransactionRow } from './transactions.js';
import { failWithRefund, recordRefund } from './refund-records.js';
import { AUTO_REFUND_CODES } from '../kernel/transaction-steps.js';
import { walletUsdcAccount } from './wallet-balances.js';
import {
  nextRefundSend, refundRetryDelayMs, refundSummary, refundTally, retriesOnItsOwn, settleRefundSend, withRefundSend, type RefundFunds, type RefundSend,
} from '../kernel/refund-due.js';
import { fundsOf, heldFunds, payoutState, refundJob, scheduleAutoRefund, scheduleExcessReturn, sendsOf } from './refund-funds.js';

export { payoutState, refundJob, scheduleAutoRefund, scheduleExcessReturn, sendsOf };

// CONTRACT section 14: every USDC an off-ramp received and neither paid out nor returned has an exit. The business
// asks for it (POST /transactions/{id}/refund), or it goes back on its own: the excess over total_required once the
// payout completed, and what an off-ramp left waiting on `underpaid` or `late_deposit` holds after
// AUTO_REFUND_AFTER_SECONDS. Each return is one ledger entry and, live, one send, named by the total returned so far
// (and its attempt, when a send of that total failed): a repeated step finds its entry (or send), a later return is a
// new one. How much is due and what the next send is: shared/kernel/refund-due.ts; the refund's status (refund_status)
// moves only along REFUND_MACHINE, written by refund-records.ts.

const minor = (value: string) => toMinor(value, USDC_SCALE);
const usdc = (value: bigint) => fromMinor(value, USDC_SCALE);

/** Failure codes whose off-ramp is refunded on its own (never retried: the quote's price is gone): the kernel's. */
export { AUTO_REFUND_CODES };

export type NotRefundableReason = 'nothing_to_refund' | 'not_refundable_status' | 'payout_outcome_unknown' | 'onramp';

function notRefundable(reason: NotRefundableReason, message: string, tx: TransactionRow): AppError {
  return new AppError('transaction_not_refundable', message, { reason, status: tx.status });
}

/** The refund as stored: its sends, and the status, amount and hash they add up to against what the off-ramp holds. */
function refundStateOf(funds: RefundFunds, sends: RefundSend[], to: string | null): RefundState {
  const summary = refundSummary(funds, sends);
  return {
    status: summary.status, amount: usdc(summary.amount), to_address: to, transaction_hash: summary.hash,
    sends: sends.map((s) => ({ ...s, amount: s.amount.toString() })),
  };
}

/** Where a refund goes: a managed wallet's funds back to it; an external wallet's to refund_address, else where they came from. */
function destinationOf(tx: TransactionRow, settlement: SettlementRow): string {
  return tx.funding_type === 'managed_wallet' ? tx.wallet_address! : tx.refund_address ?? settlement.from_address;
}

/**
 * Returns what the off-ramp holds and has neither paid out, returned nor sent back yet (the caller records the answer
 * as the transaction's `refund`, whose `amount` is what was returned so far, plus what is on its way). A managed
 * wallet's funds go back to it (its ledger balance in sandbox), an external wallet's on-chain to its refund
 * destination; a treasury-funded payout's whole amount goes back to the treasury's available balance. Live: a send
 * is staged and the refund is pending until it is mined (the chain.send job completes it, or fails it: then it is due
 * again). `requested`: the business asked (POST /refund); a failed automatic refund is tried again on its own.
 */
export async function refundOfframp(unit: Unit, chain: ChainAdapter, tx: TransactionRow, requested = false): Promise<RefundState | null> {
  if (tx.funding_type === 'treasury') return refundOf(tx) ?? refundToTreasury(unit, tx);
  const settlement = await settlementOf(unit.em, tx.id, true);
  if (!settlement) return refundOf(tx);
  const sends = sendsOf(tx);
  const funds = await fundsOf(unit.em, tx, settlement);
  const due = nextRefundSend(tx.id, funds, sends, requested);
  if (!due) return refundOf(tx);
  const { returned, inFlight } = refundTally(funds, sends);
  const to = destinationOf(tx, settlement);
  const next = { ...due, to };
  // Back into the funding wallet's account when that is where it goes; any other address is outside our books.
  const walletId = tx.funding_type === 'managed_wallet' || to.toLowerCase() === settlement.from_address.toLowerCase() ? tx.wallet_id : null;
  const sent = await chain.refund(unit, scopeOf(tx), {
    reference: next.reference, chain: tx.chain, amount: next.amount, to, settlementId: settlement.id, walletId, transactionId: tx.id, total: returned + inFlight + next.amount,
  });
  if (!sent) return refundStateOf(funds, withRefundSend(sends, next), to);
  // Sent at once (the sandbox): booked now, back into the funding wallet's account or out through inbound clearing.
  unit.post(scopeOf(tx), refundEntry({
    reference: `refund-${next.reference}`, settlementId: settlement.id, amount: next.amount,
    to: walletId ? walletUsdcAccount(walletId, tx.chain) : { kind: 'inbound_clearing', asset: 'USDC' },
  }));
  // A managed wallet's refund is a ledger credit in sandbox: no chain transaction to show.
  return refundStateOf(funds, withRefundSend(sends, { ...next, status: 'completed', hash: tx.funding_type === 'managed_wallet' ? null : sent.hash }), to);
}

async function refundToTreasury(unit: Unit, tx: TransactionRow): Promise<RefundState> {
  const total = minor(tx.total_required);
  unit.post(scopeOf(tx), {
    kind: 'treasury_payout_refund',
    reference: `treasury-refund-${tx.id}`,
    metadata: { transaction_id: tx.id, payment_intent_id: tx.payment_intent_id },
    postings: [
      { account: { kind: 'settlement_clearing', asset: 'USDC' }, amount: -total },
      { account: { kind: 'treasury', asset: 'USDC' }, amount: total },
    ],
  });
  return { status: 'completed', amount: usdc(total), to_address: null, transaction_hash: null };
}

/** A refund's ledger entry: out of the settlement's clearing account, to `to` (the wallet's account, or inbound clearing). */
export function refundEntry(req: { reference: string; settlementId: string; amount: bigint; to: LedgerAccount; transactionHash?: string }): EntryInput {
  return {
    kind: 'offramp_refund',
    reference: req.reference,
    metadata: { settlement_id: req.settlementId, ...(req.transactionHash ? { transaction_hash: req.transactionHash } : {}) },
    postings: [
      { account: { kind: 'settlement_clearing', asset: 'USDC' }, amount: -req.amount },
      { account: req.to, amount: req.amount },
    ],
  };
}

/** Whether `reference` (a chain send's: refund-<transaction>-<total>[-<attempt>]) is a send of this refund still in flight. */
export function refundSendPending(tx: TransactionRow, reference: string): boolean {
  if (!tx.refund?.sends) return tx.refund_status === 'pending';
  return sendsOf(tx).some((s) => `refund-${s.reference}` === reference && s.status === 'pending');
}

/**
 * Live: the refund's send was mined. Its USDC leaves the settlement's clearing account, the send counts as returned,
 * and the transaction's current status is announced again with the refund in it.
 */
export async function completeRefund(unit: Unit, tx: TransactionRow, send: { /** the send's: refund-<transaction>-<total>[-<attempt>] */ reference: string; amount: bigint; hash: string }): Promise<string> {
  const settlement = (await settlementOf(unit.em, tx.id))!;
  // Out of our books as it left: to the managed wallet's account, or out through inbound clearing to an external one.
  unit.post(scopeOf(tx), refundEntry({
    reference: send.reference, settlementId: settlement.id, amount: send.amount, transactionHash: send.hash,
    to: tx.funding_type === 'managed_wallet' ? walletUsdcAccount(tx.wallet_id!, tx.chain) : { kind: 'inbound_clearing', asset: 'USDC' },
  }));
  const sends = sendsOf(tx);
  const ours = sends.find((s) => `refund-${s.reference}` === send.reference);
  if (!tx.refund || !ours) return 'superseded';
  await recordRefund(unit, tx, refundStateOf(await fundsOf(unit.em, tx, settlement), settleRefundSend(sends, ours.reference, { status: 'completed', hash: send.hash }), tx.refund.to_address ?? null));
  return 'refunded';
}

/**
 * Live: the refund's send will never be mined (the chain reverted it, or it was never signed). Nothing left: its
 * amount is due again. POST /refund sends it again; an automatic one is tried again after a backoff (refund_due_at,
 * its job staged for then, the sweeper's net behind it).
 */
export async function refundSendFailed(unit: Unit, tx: TransactionRow, reference: string): Promise<string> {
  const sends = sendsOf(tx);
  const ours = sends.find((s) => `refund-${s.reference}` === reference && s.status === 'pending');
  if (!tx.refund || !ours) return 'not pending';
  const after = settleRefundSend(sends, ours.reference, { status: 'failed' });
  const funds = await fundsOf(unit.em, tx, await settlementOf(unit.em, tx.id));
  if (!retriesOnItsOwn(funds, after)) {
    await recordRefund(unit, tx, refundStateOf(funds, after, tx.refund.to_address ?? null));
    return 'refund failed; due again on request';
  }
  const delayMs = refundRetryDelayMs(after.filter((s) => s.status === 'failed').length);
  const dueAt = new Date(Date.now() + delayMs);
  await unit.stage(refundJob(tx.id, dueAt, delayMs), scopeOf(tx));
  await recordRefund(unit, tx, refundStateOf(funds, after, tx.refund.to_address ?? null), { refund_due_at: dueAt });
  return `refund failed; tried again in ${delayMs} ms`;
}

export interface RefundRequest {
  refund_address?: string;
}

/**
 * POST /transactions/{id}/refund: an off-ramp in action_required or failed gives back what it holds, to
 * `refund_address` when given (external wallets only; it becomes the off-ramp's refund destination). An
 * action_required one ends failed (`refund_requested`). Refused (409) for an on-ramp, another status, a payout whose
 * outcome is not known yet, or nothing held.
 */
export async function requestRefund(unit: Unit, chain: ChainAdapter, scope: EventScope, id: string, input: RefundRequest): Promise<TransactionRow> {
  let tx = await findTransaction(unit.em, scope, id, true);
  if (tx.direction === 'onramp') throw notRefundable('onramp', 'An on-ramp returns fiat only through the provider, never on request.', tx);
  const refundAddress = input.refund_address === undefined ? undefined : refundAddressOf(input.refund_address, tx.funding_type);
  if (tx.status !== 'action_required' && tx.status !== 'failed') {
    throw notRefundable('not_refundable_status', `An off-ramp that is ${tx.status} cannot be refunded; only action_required or failed ones can.`, tx);
  }
  if ((await payoutState(unit.em, tx)) === 'unknown') {
    throw notRefundable('payout_outcome_unknown', 'The payout request has no final answer yet: it may have paid. The provider\'s status check decides; ask again later.', tx);
  }
  const settlement = await settlementOf(unit.em, tx.id);
  if ((await heldFunds(unit.em, tx, settlement)).due <= 0n) throw notRefundable('nothing_to_refund', 'This off-ramp holds no USDC that was neither paid out nor returned.', tx);
  if (refundAddress) {
    await unit.em.query(`UPDATE transactions SET refund_address = $2 WHERE id = $1`, [tx.id, refundAddress]);
    tx = { ...tx, refund_address: refundAddress };
  }
  const refund = await refundOfframp(unit, chain, tx, true);
  if (tx.status === 'failed') return recordRefund(unit, tx, refund, { refund_due_at: null });
  const failure = { code: 'refund_requested', message: 'The business asked for the USDC back.', details: { previous_failure: tx.failure?.code ?? null } };
  const moved = await failWithRefund(unit, tx, refund, { set: { failure, refund_due_at: null }, reason: 'refund_requested' });
  if (!moved) throw notRefundable('not_refundable_status', 'This transaction changed meanwhile; read it again.', tx);
  await closeSettlement(unit, tx.id, 'refund_requested');
  return moved;
}

/** A refund destination given by the business: an EVM address (EIP-55 checked), for an external-wallet off-ramp only. */
export function refundAddressOf(raw: string, fundingType: TransactionRow['funding_type']): string {
  if (fundingType !== 'external_wallet') {
    throw AppError.invalid('refund_address is only for an off-ramp funded from an external wallet; other refunds go back where the funds came from.', [
      { path: 'refund_address', in: 'body', message: 'only with an external funding wallet' },
    ]);
  }
  const checked = checksumAddress(raw);
  if ('problem' in checked) throw AppError.invalid('refund_address must be an EVM address.', [{ path: 'refund_address', in: 'body', message: checked.problem }]);
  return checked.address;
}

// A job that runs a moment early (timers, clocks) still counts as on time.
const DUE_TOLERANCE_MS = 1000;

/**
 * The `offramp.refund` job: a completed off-ramp returns its excess (it stays completed); one still waiting on
 * `underpaid` or `late_deposit` past its deadline is refunded and fails, its failure code kept. Anything else (the
 * business refunded first, the payout outcome is unknown, the off-ramp moved on) changes nothing.
 */
export async function returnHeldFunds(unit: Unit, chain: ChainAdapter, id: string): Promise<string> {
  await unit.em.query(`SELECT 1 FROM transactions WHERE id = $1 FOR UPDATE`, [id]);
  const tx = await loadTransaction(unit.em, id);
  if (!tx) return 'gone';
  if (!tx.refund_due_at || tx.refund_due_at.getTime() > Date.now() + DUE_TOLERANCE_MS) return 'not due';
  const waiting = tx.status === 'action_required' && AUTO_REFUND_CODES.includes(tx.failure?.code ?? '');
  // An automatic refund whose send failed: sent again (a failed off-ramp keeps its status).
  const retrying = tx.status === 'failed' && retriesOnItsOwn(await fundsOf(unit.em, tx, await settlementOf(unit.em, tx.id)), sendsOf(tx));
  if (tx.status !== 'completed' && !waiting && !retrying) {
    await unit.em.query(`UPDATE transactions SET refund_due_at = NULL WHERE id = $1`, [tx.id]);
    return `unchanged (${tx.status})`;
  }
  if ((await payoutState(unit.em, tx)) === 'unknown') return 'payout outcome unknown';
  const refund = await refundOfframp(unit, chain, tx);
  if (tx.status === 'completed' || retrying) {
    await recordRefund(unit, tx, refund, { refund_due_at: null });
    return retrying ? 'refund sent again' : 'excess returned';
  }
  await failWithRefund(unit, tx, refund, { set: { refund_due_at: null }, reason: 'auto_refund' });
  await closeSettlement(unit, tx.id, 'auto_refund');
  return 'refunded';
}
