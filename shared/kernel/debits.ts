// Debits refused where they are decided (an overdraft answered as 409 or action_required), as plans: each entry is
// `guarded`, so apply() posts it at once and an InsufficientFundsError reaches the caller before anything else is
// written. Pure: the entries and jobs only; apply() carries them out in the caller's unit.
import type { Chain } from '../domain/chains.js';
import type { EventScope } from '../domain/events.js';
import type { EntryInput, LedgerAccount } from '../domain/ledger.js';
import { TRANSACTION_MACHINE } from '../domain/machines.js';
import type { JobRequest } from '../queues/producer.js';
import { plan, type Plan } from './plan.js';

const TREASURY: LedgerAccount = { kind: 'treasury', asset: 'USDC' };
const CLEARING: LedgerAccount = { kind: 'settlement_clearing', asset: 'USDC' };
const walletAccount = (walletId: string, chain: Chain): LedgerAccount => ({ kind: 'wallet', walletId, chain, asset: 'USDC' });

/** `amount` (USDC minor units) from `from`, never below zero, into the settlement clearing account. */
function debit(kind: string, reference: string, metadata: Record<string, unknown>, from: LedgerAccount, amount: bigint): EntryInput {
  return { kind, reference, metadata, postings: [{ account: from, amount: -amount, noOverdraft: true }, { account: CLEARING, amount }] };
}

/** The sandbox chain's managed-wallet send: the wallet's simulated balance pays the off-ramp (one entry per off-ramp). */
export function managedSendPlan(scope: EventScope, req: { reference: string; walletId: string; chain: Chain; amount: bigint }): Plan {
  const entry = debit('offramp_funding', `offramp-funding-${req.reference}`, { transaction_id: req.reference, wallet_id: req.walletId }, walletAccount(req.walletId, req.chain), req.amount);
  return plan(scope, 'sent', { entries: [{ entry, guarded: true }] });
}

/**
 * A payout batch funded: the treasury's one debit, into the clearing account each item's payout (or its refund) then
 * draws on, and each item (a treasury-funded off-ramp) created -> funded with its payout job.
 */
export function batchFundingPlan(scope: EventScope, batchId: string, total: bigint, items: { transactionId: string; payout: JobRequest }[] = []): Plan {
  const entry = debit('payout_batch_funding', `payout-batch-funding-${batchId}`, { payout_batch_id: batchId }, TREASURY, total);
  return plan(scope, 'funded', {
    moves: items.map((item) => ({ machine: TRANSACTION_MACHINE, id: item.transactionId, from: 'created', to: 'funded' })), entries: [{ entry, guarded: true }], jobs: items.map((item) => item.payout),
  });
}

/** A payment intent's payout from the treasury: the debit, the transaction funded (from created) and its payout job. */
export function treasuryPayoutPlan(scope: EventScope, p: { transactionId: string; intentId: string; amount: bigint; payout: JobRequest }): Plan {
  const entry = debit('treasury_payout_funding', `treasury-funding-${p.transactionId}`, { transaction_id: p.transactionId, payment_intent_id: p.intentId }, TREASURY, p.amount);
  return plan(scope, 'funded', {
    moves: [{ machine: TRANSACTION_MACHINE, id: p.transactionId, from: 'created', to: 'funded' }], entries: [{ entry, guarded: true }], jobs: [p.payout],
  });
}

/**
 * The sandbox's transfer from an external wallet to a deposit address: it leaves the wallet's simulated balance now,
 * as a signed transfer would (one entry per transfer hash), and the chain sees it when `observe` runs, a step later.
 */
export function sandboxTransferPlan(scope: EventScope, t: { settlementId: string; walletId: string; chain: Chain; amount: bigint; hash: string; observe: JobRequest }): Plan {
  const entry = debit('settlement_deposit', `deposit-${t.settlementId}-${t.hash}`, { settlement_id: t.settlementId, transaction_hash: t.hash }, walletAccount(t.walletId, t.chain), t.amount);
  return plan(scope, 'transferred', { entries: [{ entry, guarded: true }], jobs: [t.observe] });
}
