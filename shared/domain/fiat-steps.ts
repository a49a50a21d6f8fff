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
import { consumeQuote, insertTransaction, scopeOf, usableWalletOf, type TransactionRow } from './transactions.js';
import { decideAndApplyAnswered, decideAndApplyPayout, decidePayoutIn } from './payout-moves.js';
import { decideOnrampIn } from './onramp-moves.js';
import type { KnownSettlement } from './transaction-moves.js';
import { answerOfSend } from '../kernel/offramp-payouts.js';

// The steps that meet the fiat provider (payouts of off-ramps, collections of on-ramps) and the on-ramp's delivery.
// Provider calls happen outside the database transaction; these functions apply their outcome inside one.

/** What a forced sandbox outcome (`/sandbox/transactions/{id}/simulate` with `completed`) makes of the provider's answer. */
export function forcedSuccess(tx: TransactionRow): ProviderOutcome | null {
  return tx.forced_outcome?.outcome === 'completed' ? { status: 'succeeded', provider_reference: `SIM-${tx.id.slice(0, 8)}`, receipt: sandboxReceipt('forced', tx.id) } : null;
}

/**
 * funded -> processing (accepted) -> completed (paid), or failed with the refund (a permanent refusal), as
 * shared/kernel/offramp-payouts.ts decides. A temporary refusal changes nothing here: the job retries, and its final
 * failure leaves the transaction action_required.
 */
export async function applyPayoutOutcome(
  unit: Unit, chain: ChainAdapter, tx: TransactionRow, outcome: ProviderOutcome, held?: TransactionRow, known?: KnownSettlement,
): Promise<string> {
  // The provider took the request and answered: both steps are recorded (processing, then paid or refused), as with a live
  // callback, in one statement where the answer needs no refund.
  // `held`: the row as this unit read it, locked; else it is read (locked) here. `known`: its settlement, read with it.
  const answer = answerOfSend(outcome);
  if (answer) return decideAndApplyAnswered(unit, chain, tx.id, { kind: 'sent', outcome }, answer, held, known);
  return (await decideAndApplyPayout(unit, chain, tx.id, { kind: 'sent', outcome }, held, known)).outcome;
}

/** The payout job's last attempt failed: the business (or an operator) must act; retry resumes at `funded`. */
export async function payoutUnavailable(unit: Unit, tx: TransactionRow, reason: string): Promise<void> {
  await decidePayoutIn(unit, null, tx.id, { kind: 'unavailable', reason });
}

export interface StartOnrampInput {
  quote_id: string;
  payment_method: { type: 'mobile_money'; phone_number: string; mobile_network: string };
  external_reference?: string;
}

/** Consumes the on-ramp quote, checks the payer's number against the corridor, and asks the provider to collect. */
export async function startOnramp(unit: Unit, config: Config, scope: EventScope, input: StartOnrampInput): Promise<TransactionRow> {
  const { quote, wallet: receiving } = await consumeQuote(unit, scope, input.quote_id, 'onramp', null);
  const payer = checkPayer(requireCorridor(quote.currency, quote.payment_method, 'onramp'), input.payment_method);
  assertProvider(scope.environment, { db: unit.em, config }, quote.currency, quote.payment_method, payer.mobile_network);
  const wallet = usableWalletOf(receiving, quote.wallet_id!, quote.chain);
  const tx = await insertTransaction(unit, scope, {
    quote, wallet, status: 'created', externalReference: input.external_reference, payer: { phone_number: payer.phone_number, mobile_network: payer.mobile_network, keys: config },
  });
  await unit.stage(txJobs.collect(tx, stepDelay(config, scope.environment)), scope);
  return tx;
}

/**
 * created -> awaiting_funds (the payer is prompted) -> funded (paid), or failed (declined), as
 * shared/kernel/onramp-steps.ts decides. Delivery follows.
 */
export async function applyCollectionOutcome(unit: Unit, config: Config, tx: TransactionRow, outcome: ProviderOutcome): Promise<string> {
  // The payer was prompted (awaiting_funds) and answered: both steps are recorded, as with a live callback.
  const prompted = await decideOnrampIn(unit, tx.id, { kind: 'prompt_requested', outcome });
  if (prompted !== 'awaiting_funds' || outcome.status === 'pending') return prompted;
  if (outcome.status === 'declined' || outcome.status === 'rejected') {
    const failure = { code: outcome.failure?.code ?? 'collection_declined', message: outcome.failure?.message ?? 'The payer did not complete the payment.' };
    await decideOnrampIn(unit, tx.id, { kind: 'prompt_refused', failure, providerReference: outcome.provider_reference });
    return 'failed';
  }
  await decideOnrampIn(unit, tx.id, { kind: 'prompt_paid', receipt: outcome.receipt ?? null, deliver: txJobs.deliver(tx, stepDelay(config, tx.environment)) });
  return 'funded';
}

/**
 * funded -> processing -> completed: the USDC is sent and its hash recorded. The sandbox sends at once; live stages
 * the hot wallet's send, and the transaction completes when it is mined (completeDelivery, from the chain.send job).
 * The send is the chain adapter's, between the two decisions (processing, then delivered) in the same unit.
 */
export async function deliverOnramp(unit: Unit, chain: ChainAdapter, tx: TransactionRow): Promise<string> {
  const started = await decideOnrampIn(unit, tx.id, { kind: 'delivery_started' });
  if (started !== 'sending') return started;
  const sent = await chain.deliver(unit, scopeOf(tx), {
    reference: tx.id, chain: tx.chain, amount: toMinor(tx.destination_amount, USDC_SCALE), to: tx.wallet_address!, walletId: tx.wallet_id!, transactionId: tx.id,
  });
  if (!sent) return 'sending';
  return completeDelivery(unit, tx, sent.hash);
}

/** The delivery is on its way to the wallet (sandbox: recorded; live: mined): processing -> completed, the wallet credited. */
export async function completeDelivery(unit: Unit, tx: TransactionRow, hash: string): Promise<string> {
  return decideOnrampIn(unit, tx.id, { kind: 'delivered', hash });
}

/** The collection job's last attempt failed: the provider needs attention (on-ramps are not retryable by the business). */
export async function collectionUnavailable(unit: Unit, tx: TransactionRow, reason: string): Promise<void> {
  await decideOnrampIn(unit, tx.id, { kind: 'collect_unavailable', reason });
}

export function assertNotTerminal(tx: TransactionRow): void {
  if (tx.status === 'completed' || tx.status === 'failed') throw AppError.invalidState(`This transaction is ${tx.status}.`, { status: tx.status });
}
