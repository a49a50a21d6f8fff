import { inUnit } from '../../shared/db/unit-of-work.js';
import { applyCollectionOutcome, collectionUnavailable, forcedSuccess } from '../../shared/domain/fiat-steps.js';
import { awaitResult } from '../../shared/domain/provider-results.js';
import { loadTransaction, scopeOf } from '../../shared/domain/transactions.js';
import { openPayerPhone } from '../../shared/domain/payer-data.js';
import { ProviderError } from '../../shared/providers/provider.js';
import { providerFor } from '../../shared/providers/providers.js';
import { defineJob } from '../job-definition.js';

/** An on-ramp's payment is collected from the payer (STK Push in live), with our transaction id as the reference. */
export const requestCollectionJob = defineJob({
  name: 'collection.request',
  async process(job, deps) {
    const tx = await loadTransaction(deps.ds, job.data.transactionId);
    if (!tx || tx.status !== 'created') return `not created (${tx?.status ?? 'gone'})`;
    const outcome =
      forcedSuccess(tx) ??
      (await providerFor(tx.environment, { db: deps.ds, config: deps.config, log: deps.log }, tx.currency).collect({
        reference: tx.id, scope: scopeOf(tx), currency: tx.currency, amount: tx.total_required, phone_number: await openPayerPhone(deps.ds, deps.config, 'transactions', tx.id), mobile_network: tx.payer_network!,
      }));
    if (outcome.status === 'temporary_failure') throw new ProviderError(outcome.failure?.message ?? 'The provider is temporarily unavailable.', outcome.failure?.code);
    return inUnit(deps, async (unit) => {
      const applied = await applyCollectionOutcome(unit, deps.config, tx, outcome);
      await awaitResult(unit, deps.config, { transactionId: tx.id, round: 1, after: `r${tx.retry_count}` }, outcome, scopeOf(tx), tx.currency);
      return applied;
    });
  },
  async onFinalFailure(job, err, deps) {
    const tx = await loadTransaction(deps.ds, job.data.transactionId);
    if (tx?.status === 'created') await inUnit(deps, (unit) => collectionUnavailable(unit, tx, (err as Error).message));
  },
});
