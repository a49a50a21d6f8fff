import { inUnit } from '../../shared/db/unit-of-work.js';
import { applyFiatRefund, resendFiatRefund } from '../../shared/domain/onramp-refunds.js';
import { fiatRefundStep } from '../../shared/kernel/refund-machine.js';
import { openPayerPhone } from '../../shared/domain/payer-data.js';
import { loadTransaction, lockTransaction, scopeOf } from '../../shared/domain/transactions.js';
import { ProviderError } from '../../shared/providers/provider.js';
import { providerFor } from '../../shared/providers/providers.js';
import { defineJob } from '../job-definition.js';

/**
 * An on-ramp whose delivery failed for good: the fiat it collected goes back to the payer's phone as a payout whose
 * reference is our transaction id. The provider adapter claims that reference first, so a repeat of this job asks
 * what became of the earlier request (Transaction Status) before anything is sent again. A refund the provider refused
 * for good is sent again once its backoff has passed: pending once more, then a new request over the refusal.
 */
export const refundOnrampJob = defineJob({
  name: 'onramp.refund',
  async process(job, deps) {
    let tx = await loadTransaction(deps.ds, job.data.transactionId);
    const step = tx?.direction === 'onramp' ? fiatRefundStep(tx, Date.now()) : 'none';
    if (!tx || step === 'none') return `nothing to pay back (${tx?.refund_status ?? 'no refund'})`;
    if (step === 'not_due') return 'refused; not due again yet';
    if (step === 'send_again') {
      if (!(await inUnit(deps, async (unit) => resendFiatRefund(unit, (await lockTransaction(unit, tx!.id))!)))) return 'moved on meanwhile';
      tx = (await loadTransaction(deps.ds, tx.id))!;
    }
    const outcome = await providerFor(tx.environment, { db: deps.ds, config: deps.config, log: deps.log }, tx.currency).payout({
      reference: tx.id, scope: scopeOf(tx), currency: tx.currency, amount: tx.total_required, payment_method: 'mobile_money',
      account_holder_name: 'Payer', details: { phone_number: await openPayerPhone(deps.ds, deps.config, 'transactions', tx.id), mobile_network: tx.payer_network ?? 'safaricom' },
      resendRefused: true,
    });
    if (outcome.status === 'temporary_failure') throw new ProviderError(outcome.failure?.message ?? 'The provider is temporarily unavailable.', outcome.failure?.code);
    const id = tx.id;
    return inUnit(deps, async (unit) => applyFiatRefund(unit, (await lockTransaction(unit, id))!, outcome));
  },
});
