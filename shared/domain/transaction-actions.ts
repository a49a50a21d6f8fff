import type { Config } from '../config.js';
import type { Unit } from '../db/unit-of-work.js';
import type { ChainAdapter } from '../chain/adapter.js';
import { AppError } from '../errors.js';
import type { EventScope } from './events.js';
import type { TransactionStatus } from './machines.js';
import { jobForStep, stepDelay } from './lifecycle-jobs.js';
import { refundOfframp } from './offramps.js';
import { deliveryPending, failDelivery } from './onramp-refunds.js';
import { AUTO_REFUND_CODES } from './refunds.js';
import { closeSettlement } from './settlement-flow.js';
import { assertNotTerminal } from './fiat-steps.js';
import { providerJobs } from './provider-results.js';
import { findTransaction, refundOf, scopeOf, type TransactionRow } from './transactions.js';
import { moveWithRefund } from './refund-records.js';
import { moveTransaction } from './transaction-moves.js';
import type { JobRequest } from '../queues/producer.js';

/**
 * Whether the step a transaction stalled in can run again (CONTRACT §14). Managed-wallet and treasury-funded: every
 * step (the platform holds the funds). External wallets: the confirmation count (the USDC is with us) and the payout
 * (the provider adapter asks whether the earlier request paid before it sends again). On-ramps: the USDC delivery
 * (the hot wallet's send is once-only by its reference), the wait for the prompt's answer (the provider is asked) and
 * the collection request itself: the adapter claims the request by our reference first and prompts again only when no
 * earlier prompt left (one that left unanswered is waited for and asked about), so the payer is never charged twice.
 */
export function canRunAgain(tx: Pick<TransactionRow, 'direction' | 'funding_type' | 'stalled_at'>): boolean {
  if (!tx.stalled_at) return false;
  // awaiting_funds: the provider is asked what became of the prompt (STK Query); nothing is sent to the payer again.
  if (tx.direction === 'onramp') return ['created', 'awaiting_funds', 'funded', 'processing'].includes(tx.stalled_at);
  if (tx.funding_type === 'managed_wallet' || tx.funding_type === 'treasury') return true;
  return tx.stalled_at === 'awaiting_funds' || tx.stalled_at === 'funded';
}

/**
 * POST /transactions/{id}/retry: a transaction in action_required goes back to the step it stalled in (a new retry
 * count, so its job is a new one) when that step can run again, once the business has fixed the cause.
 */
export async function retryTransaction(unit: Unit, config: Config, scope: EventScope, id: string): Promise<TransactionRow> {
  const tx = await findTransaction(unit.em, scope, id, true);
  // Its quote's price is gone: what it holds is refunded (on request, or on its own), never paid out at that price.
  if (tx.status === 'action_required' && AUTO_REFUND_CODES.includes(tx.failure?.code ?? '')) {
    throw new AppError('transaction_not_retryable', `An off-ramp waiting on ${tx.failure!.code} is refunded, never retried: POST /transactions/{id}/refund.`, {
      status: tx.status, funding_type: tx.funding_type, reason: tx.failure!.code,
    });
  }
  if (tx.status !== 'action_required' || !canRunAgain(tx)) {
    throw new AppError('transaction_not_retryable', 'Only a transaction in action_required whose stalled step can run again can be retried.', {
      status: tx.status, funding_type: tx.funding_type,
    });
  }
  const step = tx.stalled_at!;
  const moved = await moveTransaction(unit, tx, step, { set: { retry_count: tx.retry_count + 1, failure: null, stalled_at: null }, reason: 'retry' });
  if (!moved) throw new AppError('transaction_not_retryable', 'This transaction changed meanwhile; read it again.', { status: tx.status });
  const job = tx.direction === 'onramp' && step === 'awaiting_funds'
    ? providerJobs.check({ transactionId: tx.id, round: 1, after: `r${moved.row.retry_count}` }, 0)
    : jobForStep(moved.row, step, stepDelay(config, tx.environment));
  if (job) await unit.stage(job, scope);
  return moved.row;
}

export interface SimulateInput {
  outcome: 'completed' | 'failed' | 'action_required';
  failure_code?: string;
}

/**
 * Sandbox control: `failed` and `action_required` happen now (a failure refunds what arrived); `completed` makes the
 * next provider decision succeed whatever the magic values say.
 */
export async function simulateOutcome(unit: Unit, chain: ChainAdapter, scope: EventScope, id: string, input: SimulateInput): Promise<TransactionRow> {
  const tx = await findTransaction(unit.em, scope, id, true);
  assertNotTerminal(tx);
  const code = input.failure_code ?? (input.outcome === 'failed' ? 'simulated_failure' : 'simulated_action_required');
  const failure = { code, message: 'Forced by the sandbox simulate control.' };
  if (input.outcome === 'completed') {
    await unit.em.query(`UPDATE transactions SET forced_outcome = $2, updated_at = now() WHERE id = $1`, [tx.id, JSON.stringify({ outcome: 'completed' })]);
  } else if (input.outcome === 'failed' && deliveryPending(tx)) {
    // The payer paid and no USDC left: the delivery fails for good and the fiat goes back to the payer.
    await failDelivery(unit, tx, { code: input.failure_code ?? 'delivery_failed', message: 'Forced by the sandbox simulate control: the USDC delivery failed for good; the payment is returned to the payer.' });
  } else if (input.outcome === 'failed') {
    const refund = tx.direction === 'offramp' ? await refundOfframp(unit, chain, tx) : null;
    await moveWithRefund(unit, tx, 'failed', refund ?? refundOf(tx), { set: { failure }, reason: code });
    if (tx.direction === 'offramp') await closeSettlement(unit, tx.id, 'transaction_failed');
  } else {
    if (tx.status === 'action_required') throw AppError.invalidState('This transaction is already action_required.', { status: tx.status });
    await moveTransaction(unit, tx, 'action_required', { set: { failure, stalled_at: tx.status }, reason: code });
  }
  return findTransaction(unit.em, scopeOf(tx), tx.id);
}
