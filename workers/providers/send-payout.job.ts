import { inUnit } from '../../shared/db/unit-of-work.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { loadActiveBeneficiary } from '../../shared/domain/beneficiaries.js';
import { applyPayoutOutcome, forcedSuccess, payoutUnavailable } from '../../shared/domain/fiat-steps.js';
import { awaitResult } from '../../shared/domain/provider-results.js';
import { loadTransaction, scopeOf } from '../../shared/domain/transactions.js';
import { ProviderError, providerFor } from '../../shared/providers/provider.js';
import { defineJob } from '../job-definition.js';

/**
 * A funded off-ramp is paid out: the provider is called with our transaction id as its reference (a retried call is
 * the same payout), then its answer is applied in one transaction. A temporary refusal is retried with backoff.
 */
export const sendPayoutJob = defineJob({
  name: 'payout.send',
  async process(job, deps) {
    const tx = await loadTransaction(deps.ds, job.data.transactionId);
    if (!tx || tx.status !== 'funded') return `not funded (${tx?.status ?? 'gone'})`;
    let outcome = forcedSuccess(tx);
    if (!outcome) {
      const beneficiary = await loadActiveBeneficiary(deps.ds, deps.config.encryptionKeys, scopeOf(tx), tx.beneficiary_id!, { allowArchived: true });
      outcome = await providerFor(tx.environment, { db: deps.ds, config: deps.config, log: deps.log }).payout({
        reference: tx.id,
        scope: scopeOf(tx),
        currency: tx.currency,
        amount: tx.destination_amount,
        payment_method: tx.payment_method,
        account_holder_name: beneficiary.beneficiary.account_holder_name,
        details: beneficiary.details,
      });
    }
    if (outcome.status === 'temporary_failure') throw new ProviderError(outcome.failure?.message ?? 'The provider is temporarily unavailable.', outcome.failure?.code);
    return inUnit(deps, async (unit) => {
      const applied = await applyPayoutOutcome(unit, chainFor(tx.environment, deps.config), tx, outcome!);
      await awaitResult(unit, deps.config, { transactionId: tx.id, round: 1 }, outcome!, scopeOf(tx));
      return applied;
    });
  },
  async onFinalFailure(job, err, deps) {
    const tx = await loadTransaction(deps.ds, job.data.transactionId);
    if (tx?.status === 'funded') await inUnit(deps, (unit) => payoutUnavailable(unit, tx, (err as Error).message));
  },
});
