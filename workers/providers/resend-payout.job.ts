import { inUnit } from '../../shared/db/unit-of-work.js';
import { awaitResult, settlePayout } from '../../shared/domain/provider-results.js';
import { loadTransaction, scopeOf } from '../../shared/domain/transactions.js';
import { decidePayoutIn } from '../../shared/domain/payout-moves.js';
import { ProviderError } from '../../shared/providers/provider.js';
import { defineJob } from '../job-definition.js';
import { loadPayout, requestPayout } from './payout-request.js';

/**
 * M-Pesa took a payout and answered it with a temporary result (our float short, busy): after a backoff the same
 * payout (same reference) is requested again, while it is still processing and nothing newer arrived.
 */
export const resendPayoutJob = defineJob({
  name: 'payout.resend',
  async process(job, deps) {
    const payout = await loadPayout(deps.ds, job.data.transactionId);
    if (payout?.tx.status !== 'processing') return `not processing (${payout?.tx.status ?? 'gone'})`;
    const { tx } = payout;
    const outcome = await requestPayout(deps, payout);
    if (outcome.status === 'temporary_failure') throw new ProviderError(outcome.failure?.message ?? 'M-Pesa is temporarily unavailable.', outcome.failure?.code);
    return inUnit(deps, async (unit) => {
      await awaitResult(unit, deps.config, { transactionId: tx.id, round: 1, after: `s${job.data.send}` }, outcome, scopeOf(tx), tx.currency);
      return outcome.status === 'pending' ? 'sent again' : settlePayout(unit, deps.config, tx, outcome);
    });
  },
  async onFinalFailure(job, err, deps) {
    const tx = await loadTransaction(deps.ds, job.data.transactionId);
    if (tx?.status !== 'processing') return;
    const failure = { code: 'provider_unavailable', message: `M-Pesa did not take the payout again: ${(err as Error).message}` };
    await inUnit(deps, (unit) => decidePayoutIn(unit, null, tx.id, { kind: 'stalled', failure }));
  },
});
