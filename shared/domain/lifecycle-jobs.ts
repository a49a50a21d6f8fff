import type { Config } from '../config.js';
import type { JobRequest } from '../queues/producer.js';
import { jobId } from '../queues/registry.js';
import type { Environment } from './chains.js';

// The jobs that move a transaction, by the business fact each stands for: the same fact is always the same job id
// (a retry of a step carries the transaction's retry count, so it is a new fact with its own id).

interface Subject {
  id: string;
  retry_count: number;
  environment: Environment;
}

/** Sandbox lifecycles advance one step every SANDBOX_STEP_MS; live steps wait on the outside world instead. */
export function stepDelay(config: Config, environment: Environment): number {
  return environment === 'sandbox' ? config.sandboxStepMs : 0;
}

/** How long until confirmations are counted again: a sandbox step, or live the chain watcher's interval. */
export function confirmPollDelay(config: Config, environment: Environment): number {
  return environment === 'sandbox' ? Math.max(config.sandboxStepMs, 1) : config.settlementPollMs;
}

/** Live: a confirmed deposit address's USDC to the hot wallet; one sweep per deposit (`round`). */
export const sweepJob = (kind: 'settlement' | 'payment_intent', id: string, round: string): JobRequest<'settlement.sweep'> => ({
  name: 'settlement.sweep', id: jobId('settlement.sweep', id, round), data: { kind, id, round },
});

interface StepSubject extends Subject {
  direction: 'offramp' | 'onramp';
  funding_type: string | null;
}

/**
 * The job that carries a transaction on from `step` (the sweeper's and retry's one map); null where the transaction
 * waits on the outside world (an external wallet's transfer, a provider's callback). `confirmRound` names the
 * confirmation check: the sweeper's own is round 0.
 */
export function jobForStep(tx: StepSubject, step: string, delayMs = 0, confirmRound = 1): JobRequest | null {
  if (tx.direction === 'onramp') return step === 'created' ? txJobs.collect(tx, delayMs) : step === 'funded' || step === 'processing' ? txJobs.deliver(tx, delayMs) : null;
  if (['created', 'signing', 'submitting'].includes(step)) return tx.funding_type === 'managed_wallet' ? txJobs.submit(tx, delayMs) : null;
  if (step === 'awaiting_funds') return txJobs.confirm(tx, confirmRound, delayMs);
  if (step === 'funded') return txJobs.payout(tx, delayMs);
  return null;
}

export const txJobs = {
  submit: (tx: Subject, delayMs = 0): JobRequest<'offramp.submit'> => ({
    name: 'offramp.submit', id: jobId('offramp.submit', tx.id, String(tx.retry_count)), data: { transactionId: tx.id }, delayMs,
  }),
  confirm: (tx: Subject, round: number, delayMs = 0): JobRequest<'settlement.confirm'> => ({
    name: 'settlement.confirm', id: jobId('settlement.confirm', tx.id, String(tx.retry_count), String(round)), data: { transactionId: tx.id, round }, delayMs,
  }),
  expire: (transactionId: string, delayMs: number): JobRequest<'settlement.expire'> => ({
    name: 'settlement.expire', id: jobId('settlement.expire', transactionId), data: { transactionId }, delayMs,
  }),
  payout: (tx: Subject, delayMs = 0): JobRequest<'payout.send'> => ({
    name: 'payout.send', id: jobId('payout.send', tx.id, String(tx.retry_count)), data: { transactionId: tx.id }, delayMs,
  }),
  collect: (tx: Subject, delayMs = 0): JobRequest<'collection.request'> => ({
    name: 'collection.request', id: jobId('collection.request', tx.id, String(tx.retry_count)), data: { transactionId: tx.id }, delayMs,
  }),
  deliver: (tx: Subject, delayMs = 0): JobRequest<'onramp.deliver'> => ({
    name: 'onramp.deliver', id: jobId('onramp.deliver', tx.id, String(tx.retry_count)), data: { transactionId: tx.id }, delayMs,
  }),
  sandboxTransfer: (settlementId: string, transactionHash: string, delayMs = 0): JobRequest<'sandbox.transfer'> => ({
    name: 'sandbox.transfer', id: jobId('sandbox.transfer', settlementId, transactionHash), data: { settlementId, transactionHash }, delayMs,
  }),
};
