import type { Config } from '../config.js';
import type { Unit } from '../db/unit-of-work.js';
import type { ChainAdapter } from '../chain/adapter.js';
import { AppError } from '../errors.js';
import type { EventScope } from './events.js';
import { apply } from '../kernel/apply.js';
import { canRunAgain, decideRetry, decideSimulatedStall } from '../kernel/transaction-steps.js';
import { jobForStep, stepDelay } from './lifecycle-jobs.js';
import { refundOfframp } from './offramps.js';
import { deliveryPending, failDelivery } from './onramp-refunds.js';
import { closeSettlement } from './settlement-flow.js';
import { assertNotTerminal } from './fiat-steps.js';
import { providerJobs } from './provider-results.js';
import { findTransaction, refundOf, scopeOf, type TransactionRow } from './transactions.js';
import { failWithRefund } from './refund-records.js';
import { TRANSACTION_VIEWS, txSnapshot } from './transaction-moves.js';
import type { JobRequest } from '../queues/producer.js';

// canRunAgain is the kernel's (shared/kernel/transaction-steps.ts); callers of this module read it here too.
export { canRunAgain };

/** The job that runs `tx`'s stalled step again under its next retry count (null: none, or no stalled step). */
function resumeJob(config: Config, tx: TransactionRow): JobRequest | null {
  const step = tx.stalled_at;
  if (!step) return null;
  const next = { ...tx, retry_count: tx.retry_count + 1 };
  return tx.direction === 'onramp' && step === 'awaiting_funds'
    ? providerJobs.check({ transactionId: tx.id, round: 1, after: `r${next.retry_count}` }, 0)
    : jobForStep(next, step, stepDelay(config, tx.environment));
}

/**
 * POST /transactions/{id}/retry: a transaction in action_required goes back to the step it stalled in (a new retry
 * count, so its job is a new one) when that step can run again, once the business has fixed the cause. Decided by
 * the kernel (transaction-steps.ts decideRetry) on the row read and locked here, carried out by apply().
 */
export async function retryTransaction(unit: Unit, config: Config, scope: EventScope, id: string): Promise<TransactionRow> {
  const tx = await findTransaction(unit.em, scope, id, true);
  const decided = decideRetry(txSnapshot(tx), { resume: resumeJob(config, tx) });
  // Its quote's price is gone: what it holds is refunded (on request, or on its own), never paid out at that price.
  if (decided.refused === 'auto_refund') {
    throw new AppError('transaction_not_retryable', `An off-ramp waiting on ${tx.failure!.code} is refunded, never retried: POST /transactions/{id}/refund.`, {
      status: tx.status, funding_type: tx.funding_type, reason: tx.failure!.code,
    });
  }
  if (decided.refused) {
    throw new AppError('transaction_not_retryable', 'Only a transaction in action_required whose stalled step can run again can be retried.', {
      status: tx.status, funding_type: tx.funding_type,
    });
  }
  const moved = (await apply(unit, decided, TRANSACTION_VIEWS)).get(tx.id);
  return moved as unknown as TransactionRow;
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
    await failWithRefund(unit, tx, refund ?? refundOf(tx), { set: { failure }, reason: code });
    if (tx.direction === 'offramp') await closeSettlement(unit, tx.id, 'transaction_failed');
  } else {
    const decided = decideSimulatedStall(txSnapshot(tx), failure);
    if (decided.refused) throw AppError.invalidState('This transaction is already action_required.', { status: tx.status });
    await apply(unit, decided, TRANSACTION_VIEWS);
  }
  return findTransaction(unit.em, scopeOf(tx), tx.id);
}
