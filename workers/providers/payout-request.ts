import { loadActiveBeneficiary } from '../../shared/domain/beneficiaries.js';
import { scopeOf, type TransactionRow } from '../../shared/domain/transactions.js';
import { type ProviderOutcome } from '../../shared/providers/provider.js';
import { providerFor } from '../../shared/providers/providers.js';
import type { WorkerDeps } from '../job-definition.js';

/** Asks the provider to pay an off-ramp out, with our transaction id as the reference (a repeat is the same payout). */
export async function requestPayout(deps: WorkerDeps, tx: TransactionRow): Promise<ProviderOutcome> {
  const beneficiary = await loadActiveBeneficiary(deps.ds, deps.config.encryptionKeys, scopeOf(tx), tx.beneficiary_id!, { allowArchived: true });
  return providerFor(tx.environment, { db: deps.ds, config: deps.config, log: deps.log }, tx.currency).payout({
    reference: tx.id,
    scope: scopeOf(tx),
    currency: tx.currency,
    amount: tx.destination_amount,
    payment_method: tx.payment_method,
    account_holder_name: beneficiary.beneficiary.account_holder_name,
    details: beneficiary.details,
  });
}
