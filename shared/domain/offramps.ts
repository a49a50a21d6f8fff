import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import { inUnit, updateReturning, type Unit, type UnitDeps } from '../db/unit-of-work.js';
import type { ChainAdapter } from '../chain/adapter.js';
import type { EventScope } from './events.js';
import { lockedBalance, postEntry } from './ledger.js';
import { fromMinor, toMinor, USDC_SCALE } from './money.js';
import { stepDelay, txJobs } from './lifecycle-jobs.js';
import {
  createSettlement, isFullyPaid, lastTransferAt, moveSettlement, recordTransfer, setConfirmations, settlementOf, settlementView, type ObservedTransfer, type SettlementRow,
} from './settlements.js';
import { consumeQuote, insertTransaction, loadTransaction, moveTransaction, scopeOf, transactionView, usableWallet, type TransactionRow } from './transactions.js';
import { walletUsdcAccount } from './wallet-balances.js';
import { NOW } from './transition.js';

export interface StartOfframpInput {
  quote_id: string;
  funding_source: { wallet_id: string };
  external_reference?: string;
}

const minor = (value: string) => toMinor(value, USDC_SCALE);
const usdc = (value: bigint) => fromMinor(value, USDC_SCALE);

/**
 * Consumes the quote, creates the transaction (`created`) and its settlement (`awaiting_transfer`, a fresh deposit
 * address), and stages what comes next: the expiry check, and for a managed wallet the platform's own transfer.
 */
export async function startOfframp(unit: Unit, config: Config, scope: EventScope, input: StartOfframpInput): Promise<{ transaction: TransactionRow; settlement: SettlementRow }> {
  const quote = await consumeQuote(unit, scope, input.quote_id, 'offramp');
  const wallet = await usableWallet(unit.em, scope, input.funding_source.wallet_id, quote.chain);
  // Archived since the quote was priced: no new payout to it (one already under way still completes).
  const [beneficiary]: { status: string }[] = await unit.em.query(`SELECT status FROM beneficiaries WHERE id = $1 FOR SHARE`, [quote.beneficiary_id]);
  if (beneficiary?.status !== 'active') throw new AppError('resource_archived', 'This quote\'s beneficiary is archived and cannot be paid.', { beneficiary_id: quote.beneficiary_id });
  const fundingType = wallet.type === 'managed_wallet' ? 'managed_wallet' : 'external_wallet';
  const transaction = await insertTransaction(unit, scope, { quote, wallet, status: 'created', externalReference: input.external_reference, fundingType });
  const fees = minor(quote.provider_fee!) + minor(quote.platform_fee!);
  const settlement = await createSettlement(unit, config, scope, {
    transactionId: transaction.id, chain: quote.chain, fromAddress: wallet.address, amount: quote.source_amount!, feeAmount: usdc(fees), totalRequired: quote.total_required!,
  });
  await unit.stage(txJobs.expire(transaction.id, config.settlementTtlSeconds * 1000), scope);
  if (fundingType === 'managed_wallet') await unit.stage(txJobs.submit(transaction, stepDelay(config, scope.environment)), scope);
  return { transaction, settlement };
}

/**
 * Managed wallet: created -> signing -> submitting, the transfer sent (the sandbox debits the wallet), committed; then
 * the transfer is observed like any other. Not enough USDC: action_required `insufficient_funds`, retryable after
 * funding. The wallet's balance is checked and held first and the ledger entry posted last, so the business's shared
 * clearing account stays locked only for the moment of the commit.
 */
export async function submitOfframp(deps: UnitDeps, config: Config, chain: ChainAdapter, tx: TransactionRow): Promise<string> {
  if (tx.status === 'submitting') {
    // Sent and committed, but not yet observed (the job stopped in between): observe what was sent.
    const settlement = (await settlementOf(deps.ds, tx.id))!;
    const hash = (settlement.execution.submitted as { transaction_hash?: string } | undefined)?.transaction_hash;
    if (!hash) return 'submitting without a transfer';
    await inUnit(deps, (unit) => observeTransfer(unit, config, settlement, { transactionHash: hash, logIndex: 0, amount: minor(settlement.total_required) }));
    return 'observed';
  }
  const sent = await inUnit(deps, async (unit) => {
    if (tx.status === 'created' && !(await moveTransaction(unit, tx, 'signing'))) return 'moved on';
    if (tx.status !== 'created' && tx.status !== 'signing') return `not submittable (${tx.status})`;
    const settlement = (await settlementOf(unit.em, tx.id, true))!;
    const wallet = await usableWallet(unit.em, scopeOf(tx), tx.wallet_id!, tx.chain);
    const total = minor(settlement.total_required);
    const available = await lockedBalance(unit.em, scopeOf(tx), walletUsdcAccount(wallet.id, tx.chain));
    if (available < total) {
      await moveTransaction(unit, tx, 'action_required', {
        set: {
          stalled_at: 'signing',
          failure: { code: 'insufficient_funds', message: 'The managed wallet holds too little USDC; fund it and retry.', details: { available: usdc(available), required: usdc(total) } },
        },
        reason: 'insufficient_funds',
      });
      return 'insufficient_funds';
    }
    const submitting = (await moveTransaction(unit, tx, 'submitting'))!;
    const hash = await sendAndNote(unit, chain, tx, settlement, wallet);
    // The shared clearing account is striped, so observing in the same transaction holds no lock others wait on.
    await observeTransfer(unit, config, settlement, { transactionHash: hash, logIndex: 0, amount: total }, submitting.row, chain);
    return 'submitted';
  });
  return sent;
}

async function sendAndNote(unit: Unit, chain: ChainAdapter, tx: TransactionRow, settlement: SettlementRow, wallet: { id: string; hd_index: number | null }): Promise<string> {
  const sent = await chain.sendFromManagedWallet(unit, scopeOf(tx), {
    reference: tx.id, chain: tx.chain, amount: minor(settlement.total_required), to: settlement.to_address, walletId: wallet.id, hdIndex: wallet.hd_index ?? 0,
  });
  await unit.em.query(`UPDATE settlements SET execution = execution || $2::jsonb, updated_at = now() WHERE id = $1`, [
    settlement.id, JSON.stringify({ submitted: { transaction_hash: sent.hash, nonce: sent.nonce } }),
  ]);
  return sent.hash;
}

/**
 * A transfer to the deposit address (the sandbox control, the chain watcher, or our own submission): counted once.
 * Paid in full, the settlement starts confirming and the transaction awaits its funds; less stays awaiting_transfer.
 */
export async function observeTransfer(
  unit: Unit,
  config: Config,
  settlement: SettlementRow,
  transfer: ObservedTransfer,
  current?: TransactionRow,
  chain?: ChainAdapter,
): Promise<SettlementRow> {
  const { settlement: updated, isNew } = await recordTransfer(unit, settlement, transfer);
  if (!isNew) return updated;
  const tx = current ?? (await loadTransaction(unit.em, updated.transaction_id))!;
  // After expiry, or once the transaction has ended: counted, never lost, and left to the business (late_deposit).
  if (['expired', 'underpaid'].includes(updated.status) || tx.status === 'failed' || tx.status === 'completed') {
    await lateDeposit(unit, updated, tx);
    return updated;
  }
  if (!isFullyPaid(updated) || updated.status !== 'awaiting_transfer') return updated;
  const confirming = (await moveSettlement(unit, updated, 'confirming'))!;
  const moved = await moveTransaction(unit, tx, 'awaiting_funds', tx.status === 'action_required' ? { set: { failure: null, stalled_at: null } } : {});
  // With the chain at hand, count at once (a transfer may already be deep enough); else the confirmation job does.
  if (moved && chain) await countConfirmations(unit, config, chain, moved.row, confirming.row, 0);
  else if (moved) await unit.stage(txJobs.confirm(moved.row, 1, stepDelay(config, tx.environment)), scopeOf(tx));
  return updated;
}

/**
 * A transfer to a closed settlement (expired, underpaid, or its transaction ended): the off-ramp goes to
 * action_required `late_deposit` with what has arrived, for the business to decide; a completed one only records it.
 */
async function lateDeposit(unit: Unit, settlement: SettlementRow, tx: TransactionRow): Promise<void> {
  const view = settlementView(settlement);
  const failure = {
    code: 'late_deposit',
    message: 'A transfer arrived after the settlement closed.',
    details: { received_amount: view.received_amount, total_required: view.total_required },
  };
  if (tx.status === 'action_required') {
    // Already waiting on the business: the reason it waits is now the late deposit.
    const rows = await updateReturning<TransactionRow>(unit.em, `UPDATE transactions SET failure = $2, updated_at = now() WHERE id = $1 RETURNING *`, [tx.id, JSON.stringify(failure)]);
    // Same status, a new reason: announced like a status change, so webhook consumers see what the business must do now.
    unit.event(scopeOf(tx), 'transaction.action_required', transactionView(rows[0]));
  } else if (tx.status !== 'completed') {
    await moveTransaction(unit, tx, 'action_required', { set: { stalled_at: 'created', failure }, reason: 'late_deposit' });
  }
}

/** Confirmations counted from the chain; at the required number the settlement is confirmed and the payout starts. */
export async function confirmSettlement(unit: Unit, config: Config, chain: ChainAdapter, tx: TransactionRow, round: number): Promise<string> {
  if (tx.status !== 'awaiting_funds') return `not awaiting funds (${tx.status})`;
  const settlement = (await settlementOf(unit.em, tx.id, true))!;
  if (settlement.status !== 'confirming') return `settlement ${settlement.status}`;
  return countConfirmations(unit, config, chain, tx, settlement, round);
}

/** Counts now; deep enough: confirmed, funded, payout staged; else another check a step later. */
async function countConfirmations(unit: Unit, config: Config, chain: ChainAdapter, tx: TransactionRow, settlement: SettlementRow, round: number): Promise<string> {
  const seen = await lastTransferAt(unit.em, settlement.id);
  const confirmations = Math.min(await chain.confirmations({ ...settlement, detected_at: seen ?? settlement.detected_at }), settlement.required_confirmations);
  if (confirmations < settlement.required_confirmations) {
    await setConfirmations(unit, settlement, confirmations);
    await unit.stage(txJobs.confirm(tx, round + 1, Math.max(stepDelay(config, tx.environment), 1)), scopeOf(tx));
    return `${confirmations}/${settlement.required_confirmations}`;
  }
  await moveSettlement(unit, settlement, 'confirmed', { confirmed_at: NOW, confirmations });
  const funded = await moveTransaction(unit, tx, 'funded');
  if (funded) await unit.stage(txJobs.payout(funded.row, stepDelay(config, tx.environment)), scopeOf(tx));
  return 'funded';
}

/** At expires_at: nothing received fails the transaction; part of the amount leaves it to the business (underpaid). */
export async function expireSettlement(unit: Unit, tx: TransactionRow): Promise<string> {
  const settlement = (await settlementOf(unit.em, tx.id, true))!;
  if (settlement.status !== 'awaiting_transfer' || settlement.expires_at > new Date()) return `unchanged (${settlement.status})`;
  if (tx.status === 'failed' || tx.status === 'completed') {
    await moveSettlement(unit, settlement, 'expired', {}, `transaction_${tx.status}`);
    return 'closed';
  }
  if (minor(settlement.received_amount) === 0n) {
    await moveSettlement(unit, settlement, 'expired');
    await moveTransaction(unit, tx, 'failed', { set: { failure: { code: 'settlement_expired', message: 'No transfer arrived before the settlement expired.' } }, reason: 'settlement_expired' });
    return 'expired';
  }
  await moveSettlement(unit, settlement, 'underpaid');
  if (tx.status === 'action_required') return 'underpaid';
  await moveTransaction(unit, tx, 'action_required', {
    set: {
      stalled_at: tx.status,
      failure: {
        code: 'underpaid',
        message: 'Less than total_required arrived before the settlement expired.',
        details: { received_amount: settlementView(settlement).received_amount, total_required: settlementView(settlement).total_required },
      },
    },
    reason: 'underpaid',
  });
  return 'underpaid';
}

/**
 * What arrived goes back: to the managed wallet's balance, or on-chain to the external wallet it came from; a
 * treasury-funded payout's whole amount goes back to the treasury's available balance.
 */
export async function refundOfframp(unit: Unit, chain: ChainAdapter, tx: TransactionRow): Promise<Record<string, unknown> | null> {
  if (tx.funding_type === 'treasury') return refundToTreasury(unit, tx);
  const settlement = await settlementOf(unit.em, tx.id, true);
  const received = settlement ? minor(settlement.received_amount) : 0n;
  // Only what has not gone back yet: a late deposit after a first refund is refunded on its own.
  const already = tx.refund ? minor(tx.refund.amount) : 0n;
  const due = received - already;
  if (!settlement || due <= 0n) return tx.refund;
  const scope = scopeOf(tx);
  // One refund per amount received so far: a repeated step finds its entry, a later one is a new entry.
  const reference = `${tx.id}-${received}`;
  let hash: string | null = tx.refund?.transaction_hash ?? null;
  if (tx.funding_type === 'managed_wallet') {
    await postEntry(unit.em, scope, {
      kind: 'offramp_refund',
      reference: `refund-${reference}`,
      metadata: { transaction_id: tx.id },
      postings: [
        { account: { kind: 'settlement_clearing', asset: 'USDC' }, amount: -due },
        { account: walletUsdcAccount(tx.wallet_id!, tx.chain), amount: due },
      ],
    });
  } else {
    hash = (await chain.refundExternal(unit, scope, { reference, chain: tx.chain, amount: due, to: settlement.from_address, settlementId: settlement.id, walletId: tx.wallet_id! })).hash;
  }
  return { status: 'completed', amount: usdc(received), transaction_hash: hash };
}

async function refundToTreasury(unit: Unit, tx: TransactionRow): Promise<Record<string, unknown>> {
  const total = minor(tx.total_required);
  await postEntry(unit.em, scopeOf(tx), {
    kind: 'treasury_payout_refund',
    reference: `treasury-refund-${tx.id}`,
    metadata: { transaction_id: tx.id, payment_intent_id: tx.payment_intent_id },
    postings: [
      { account: { kind: 'settlement_clearing', asset: 'USDC' }, amount: -total },
      { account: { kind: 'treasury', asset: 'USDC' }, amount: total },
    ],
  });
  return { status: 'completed', amount: usdc(total), transaction_hash: null };
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
