import { inUnit } from '../../shared/db/unit-of-work.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { applyPayoutOutcome, forcedSuccess, payoutUnavailable } from '../../shared/domain/fiat-steps.js';
import { awaitResult } from '../../shared/domain/provider-results.js';
import { loadTransaction, scopeOf } from '../../shared/domain/transactions.js';
import { ProviderError } from '../../shared/providers/provider.js';
import { loadPayout, requestPayout } from './payout-request.js';
import { defineJob } from '../job-definition.js';

/**
 * A funded off-ramp is paid out: the provider is called with our transaction id as its reference (a retried call is
 * the same payout), then its answer is applied in one transaction. A temporary refusal is retried with backoff.
 */
export const sendPayoutJob = defineJob({
  name: 'payout.send',
  async process(job, deps) {
    const payout = await loadPayout(deps, job.data.transactionId);
    if (payout?.tx.status !== 'funded') return `not funded (${payout?.tx.status ?? 'gone'})`;
    const { tx } = payout;
    const outcome = forcedSuccess(tx) ?? (await requestPayout(deps, payout));
    if (outcome.status === 'temporary_failure') throw new ProviderError(outcome.failure?.message ?? 'The provider is temporarily unavailable.', outcome.failure?.code);
    return inUnit(deps, async (unit) => {
      const applied = await applyPayoutOutcome(unit, chainFor(tx.environment, deps.config), tx, outcome);
      await awaitResult(unit, deps.config, { transactionId: tx.id, round: 1, after: `r${tx.retry_count}` }, outcome, scopeOf(tx), tx.currency);
      return applied;
    });
  },
  async onFinalFailure(job, err, deps) {
    const tx = await loadTransaction(deps.ds, job.data.transactionId);
    if (tx?.status === 'funded') await inUnit(deps, (unit) => payoutUnavailable(unit, tx, (err as Error).message));
  },
});
