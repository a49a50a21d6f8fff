import { inUnit } from '../../shared/db/unit-of-work.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { collectionCameToNothing, collectionFailure, intentScope, loadPaymentIntent } from '../../shared/domain/payment-intents.js';
import { awaitResult } from '../../shared/domain/provider-results.js';
import { openPayerPhone } from '../../shared/domain/payer-data.js';
import { mobileMoneyPayment, recordPayment } from '../../shared/domain/treasury-deposits.js';
import { ProviderError } from '../../shared/providers/provider.js';
import { providerFor } from '../../shared/providers/providers.js';
import { defineJob } from '../job-definition.js';

/**
 * Prompts a payment intent's payer for its amount (STK Push in live), with `<intent id>-<attempt>` as the reference, so
 * a retried call is the same prompt and a new collect is a new one. Paid: a treasury deposit. Declined: the intent
 * waits for payment again.
 */
export const collectIntentJob = defineJob({
  name: 'intent.collect',
  async process(job, deps) {
    const intent = await loadPaymentIntent(deps.ds, job.data.intentId);
    if (!intent || intent.status !== 'processing' || intent.collection_attempts !== job.data.attempt) return `moved on (${intent?.status ?? 'gone'})`;
    const outcome = await providerFor(intent.environment, { db: deps.ds, config: deps.config, log: deps.log }, intent.currency).collect({
      reference: `${intent.id}-${job.data.attempt}`, scope: intentScope(intent), currency: intent.currency, amount: intent.amount,
      phone_number: await openPayerPhone(deps.ds, deps.config, 'payment_intents', intent.id), mobile_network: intent.payer_network!,
    });
    if (outcome.status === 'temporary_failure') throw new ProviderError(outcome.failure?.message ?? 'The provider is temporarily unavailable.', outcome.failure?.code);
    return inUnit(deps, async (unit) => {
      await unit.em.query(`UPDATE payment_intents SET provider_reference = $2 WHERE id = $1 AND collection_attempts = $3`, [intent.id, outcome.provider_reference, job.data.attempt]);
      if (outcome.status === 'succeeded') {
        await recordPayment(unit, deps.config, intent.id, mobileMoneyPayment(intent, outcome.provider_reference!, outcome.receipt), chainFor(intent.environment, deps.config));
        return 'paid';
      }
      // Accepted: the payer is prompted, and the provider's callback brings the result (live).
      if (outcome.status === 'pending') {
        await awaitResult(unit, deps.config, { intentId: intent.id, attempt: job.data.attempt, round: 1 }, outcome, intentScope(intent), intent.currency);
        return 'prompted';
      }
      return collectionCameToNothing(unit, intent, collectionFailure(outcome), outcome.provider_reference);
    });
  },
  async onFinalFailure(job, err, deps) {
    const intent = await loadPaymentIntent(deps.ds, job.data.intentId);
    if (intent?.status !== 'processing' || intent.collection_attempts !== job.data.attempt) return;
    await inUnit(deps, (unit) => collectionCameToNothing(unit, intent, { code: 'provider_unavailable', message: `The collection provider did not respond: ${(err as Error).message}` }, null));
  },
});
