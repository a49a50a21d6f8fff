import type { Config } from '../config.js';
import type { Unit } from '../db/unit-of-work.js';
import type { ChainAdapter } from '../chain/adapter.js';
import type { ProviderOutcome } from '../providers/provider.js';
import { AppError } from '../errors.js';
import { sandboxReceipt } from '../providers/sandbox-provider.js';
import { assertProvider } from '../providers/providers.js';
import type { EventScope } from './events.js';
import { checkPayer } from './corridor-details.js';
import { requireCorridor } from './corridors.js';
import { toMinor, USDC_SCALE } from './money.js';
import { stepDelay, txJobs } from './lifecycle-jobs.js';
import { payoutEntry, refundOfframp } from './offramps.js';
import { consumeQuote, insertTransaction, scopeOf, usableWallet, type TransactionRow } from './transactions.js';
import { moveTransaction } from './transaction-moves.js';
import { moveWithRefund } from './refund-records.js';
import { NOW } from './transition.js';
import { walletUsdcAccount } from './wallet-balances.js';

// The steps that meet the fiat provider (payouts of off-ramps, collections of on-ramps) and the on-ramp's delivery.
// Provider calls happen outside the database transaction; these functions apply their outcome inside one.

/** What a forced sandbox outcome (`/sandbox/transactions/{id}/simulate` with `completed`) makes of the provider's answer. */
export function forcedSuccess(tx: TransactionRow): ProviderOutcome | null {
  return tx.forced_outcome?.outcome === 'completed' ? { status: 'succeeded', provider_reference: `SIM-${tx.id.slice(0, 8)}`, receipt: sandboxReceipt('forced', tx.id) } : null;
}

/**
 * funded -> processing (accepted) -> completed (paid), or failed with the refund (a permanent refusal). A temporary
 * refusal changes nothing here: the job retries, and its final failure leaves the transaction action_required.
 */
export async function applyPayoutOutcome(unit: Unit, chain: ChainAdapter, tx: TransactionRow, outcome: ProviderOutcome): Promise<string> {
  if (tx.status !== 'funded') return `not funded (${tx.status})`;
  if (outcome.status === 'temporary_failure') return 'temporary';
  if (outcome.status === 'rejected' || outcome.status === 'declined') {
    // The provider took the request (processing) and refused it: both steps are recorded, as with a live callback.
    const processing = await moveTransaction(unit, tx, 'processing', { set: { provider_reference: outcome.provider_reference } });
    if (!processing) return 'moved on';
    const refund = await refundOfframp(unit, chain, tx);
    await moveWithRefund(unit, processing.row, 'failed', refund, {
      set: { failure: { code: outcome.failure?.code ?? 'payout_rejected', message: outcome.failure?.message ?? 'The provider refused the payout.' }, provider_reference: outcome.provider_reference },
      reason: outcome.failure?.code ?? 'payout_rejected',
    });
    return 'failed';
  }
  const processing = await moveTransaction(unit, tx, 'processing', { set: { provider_reference: outcome.provider_reference } });
  if (!processing) return 'moved on';
  if (outcome.status === 'pending') return 'processing';
  await moveTransaction(unit, processing.row, 'completed', { set: { completed_at: NOW, receipt: outcome.receipt ?? null }, ledger: () => payoutEntry(tx) });
  return 'completed';
}

/** The payout job's last attempt failed: the business (or an operator) must act; retry resumes at `funded`. */
export async function payoutUnavailable(unit: Unit, tx: TransactionRow, reason: string): Promise<void> {
  await moveTransaction(unit, tx, 'action_required', {
    set: { stalled_at: 'funded', failure: { code: 'provider_unavailable', message: `The payout provider did not accept the payout: ${reason}` } },
    reason: 'provider_unavailable',
  });
}

export interface StartOnrampInput {
  quote_id: string;
  payment_method: { type: 'mobile_money'; phone_number: string; mobile_network: string };
  external_reference?: string;
}

/** Consumes the on-ramp quote, checks the payer's number against the corridor, and asks the provider to collect. */
export async function startOnramp(unit: Unit, config: Config, scope: EventScope, input: StartOnrampInput): Promise<TransactionRow> {
  const quote = await consumeQuote(unit, scope, input.quote_id, 'onramp');
  const payer = checkPayer(requireCorridor(quote.currency, quote.payment_method, 'onramp'), input.payment_method);
  assertProvider(scope.environment, { db: unit.em, config }, quote.currency, quote.payment_method, payer.mobile_network);
  const wallet = await usableWallet(unit.em, scope, quote.wallet_id!, quote.chain);
  const tx = await insertTransaction(unit, scope, {
    quote, wallet, status: 'created', externalReference: input.external_reference, payer: { phone_number: payer.phone_number, mobile_network: payer.mobile_network, keys: config },
  });
  await unit.stage(txJobs.collect(tx, stepDelay(config, scope.environment)), scope);
  return tx;
}

/** created -> awaiting_funds (the payer is prompted) -> funded (paid), or failed (declined). Delivery follows. */
export async function applyCollectionOutcome(unit: Unit, config: Config, tx: TransactionRow, outcome: ProviderOutcome): Promise<string> {
  if (tx.status !== 'created') return `not created (${tx.status})`;
  if (outcome.status === 'temporary_failure') return 'temporary';
  if (outcome.status === 'declined' || outcome.status === 'rejected') {
    // The payer was prompted (awaiting_funds) and declined: both steps are recorded, as with a live callback.
    const prompted = await moveTransaction(unit, tx, 'awaiting_funds', { set: { provider_reference: outcome.provider_reference } });
    if (!prompted) return 'moved on';
    await moveTransaction(unit, prompted.row, 'failed', {
      set: { failure: { code: outcome.failure?.code ?? 'collection_declined', message: outcome.failure?.message ?? 'The payer did not complete the payment.' }, provider_reference: outcome.provider_reference },
      reason: 'collection_declined',
    });
    return 'failed';
  }
  const prompted = await moveTransaction(unit, tx, 'awaiting_funds', { set: { provider_reference: outcome.provider_reference } });
  if (!prompted || outcome.status === 'pending') return 'awaiting_funds';
  const funded = await moveTransaction(unit, prompted.row, 'funded', { set: { receipt: outcome.receipt ?? null } });
  if (funded) await unit.stage(txJobs.deliver(funded.row, stepDelay(config, tx.environment)), scopeOf(tx));
  return 'funded';
}

/**
 * funded -> processing -> completed: the USDC is sent and its hash recorded. The sandbox sends at once; live stages
 * the hot wallet's send, and the transaction completes when it is mined (completeDelivery, from the chain.send job).
 */
export async function deliverOnramp(unit: Unit, chain: ChainAdapter, tx: TransactionRow): Promise<string> {
  if (tx.status !== 'funded' && tx.status !== 'processing') return `not funded (${tx.status})`;
  const processing = tx.status === 'processing' ? { row: tx } : await moveTransaction(unit, tx, 'processing');
  if (!processing) return 'moved on';
  const sent = await chain.deliver(unit, scopeOf(tx), {
    reference: tx.id, chain: tx.chain, amount: toMinor(tx.destination_amount, USDC_SCALE), to: tx.wallet_address!, walletId: tx.wallet_id!, transactionId: tx.id,
  });
  if (!sent) return 'sending';
  return completeDelivery(unit, processing.row, sent.hash);
}

/** The delivery is on its way to the wallet (sandbox: recorded; live: mined): processing -> completed, the wallet credited. */
export async function completeDelivery(unit: Unit, tx: TransactionRow, hash: string): Promise<string> {
  if (tx.status !== 'processing') return `not processing (${tx.status})`;
  const amount = toMinor(tx.destination_amount, USDC_SCALE);
  await moveTransaction(unit, tx, 'completed', {
    set: { destination_transaction_hash: hash, completed_at: NOW },
    ledger: () => ({
      kind: 'onramp_delivery',
      reference: `onramp-delivery-${tx.id}`,
      metadata: { transaction_id: tx.id, wallet_id: tx.wallet_id, transaction_hash: hash },
      postings: [
        { account: { kind: 'provider_clearing' as const, asset: 'USDC' }, amount: -amount },
        { account: walletUsdcAccount(tx.wallet_id!, tx.chain), amount },
      ],
    }),
  });
  return 'completed';
}

/** The collection job's last attempt failed: the provider needs attention (on-ramps are not retryable by the business). */
export async function collectionUnavailable(unit: Unit, tx: TransactionRow, reason: string): Promise<void> {
  await moveTransaction(unit, tx, 'action_required', {
    set: { stalled_at: 'created', failure: { code: 'provider_unavailable', message: `The collection provider did not respond: ${reason}` } },
    reason: 'provider_unavailable',
  });
}

export function assertNotTerminal(tx: TransactionRow): void {
  if (tx.status === 'completed' || tx.status === 'failed') throw AppError.invalidState(`This transaction is ${tx.status}.`, { status: tx.status });
}
