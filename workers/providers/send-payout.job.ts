import { inUnit, type Unit } from '../../shared/db/unit-of-work.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { applyPayoutOutcome, forcedSuccess, payoutUnavailable } from '../../shared/domain/fiat-steps.js';
import { awaitResult } from '../../shared/domain/provider-results.js';
import { loadTransaction, scopeOf, type TransactionRow } from '../../shared/domain/transactions.js';
import { ProviderError, type ProviderOutcome } from '../../shared/providers/provider.js';
import { loadPayout, payoutProvider, requestPayout, type PayoutToMake } from './payout-request.js';
import { defineJob, type WorkerDeps } from '../job-definition.js';

/** The provider's answer applied: the transaction's moves, and its status check staged while it is pending. */
async function applyAnswer(unit: Unit, deps: WorkerDeps, tx: TransactionRow, outcome: ProviderOutcome, held?: PayoutToMake): Promise<string> {
  const applied = await applyPayoutOutcome(unit, chainFor(tx.environment, deps.config), tx, outcome, held?.tx, held?.settlement);
  await awaitResult(unit, deps.config, { transactionId: tx.id, round: 1, after: `r${tx.retry_count}` }, outcome, scopeOf(tx), tx.currency);
  return applied;
}

/** A temporary refusal: the job tries again with backoff (its final failure leaves the transaction action_required). */
const refused = (outcome: ProviderOutcome) => new ProviderError(outcome.failure?.message ?? 'The provider is temporarily unavailable.', outcome.failure?.code);

/**
 * A funded off-ramp is paid out: the provider is called with our transaction id as its reference (a retried call is
 * the same payout), then its answer is applied in one transaction. A temporary refusal is retried with backoff.
 * Where the provider answers from the database alone (the sandbox) or the outcome is forced, the off-ramp is read
 * (locked), requested and moved in one unit; a temporary refusal commits its record before the job tries again.
 */
export const sendPayoutJob = defineJob({
  name: 'payout.send',
  async process(job, deps) {
    const first = await inUnit(deps, async (unit): Promise<{ done?: string; refusal?: ProviderOutcome; payout?: PayoutToMake }> => {
      const payout = await loadPayout(unit.em, job.data.transactionId, true);
      if (payout?.tx.status !== 'funded') return { done: `not funded (${payout?.tx.status ?? 'gone'})` };
      const forced = forcedSuccess(payout.tx);
      const provider = payoutProvider(deps, payout.tx, unit.em);
      if (!forced && !provider.answersInUnit) return { payout };
      const outcome = forced ?? (await requestPayout(deps, payout, provider));
      if (outcome.status === 'temporary_failure') return { refusal: outcome };
      return { done: await applyAnswer(unit, deps, payout.tx, outcome, payout) };
    });
    if (first.refusal) throw refused(first.refusal);
    if (!first.payout) return first.done!;
    // A real provider: the request is recorded and sent outside any unit, and its answer applied in one.
    const { tx } = first.payout;
    const outcome = await requestPayout(deps, first.payout);
    if (outcome.status === 'temporary_failure') throw refused(outcome);
    return inUnit(deps, (unit) => applyAnswer(unit, deps, tx, outcome));
  },
  async onFinalFailure(job, err, deps) {
    const tx = await loadTransaction(deps.ds, job.data.transactionId);
    if (tx?.status === 'funded') await inUnit(deps, (unit) => payoutUnavailable(unit, tx, (err as Error).message));
  },
});
