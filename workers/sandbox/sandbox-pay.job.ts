import { inUnit } from '../../shared/db/unit-of-work.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { simulatedHash } from '../../shared/chain/adapter.js';
import { loadPaymentIntent } from '../../shared/domain/payment-intents.js';
import { fromMinor, toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { mobileMoneyPayment, recordPayment } from '../../shared/domain/treasury-deposits.js';
import { sandboxProviderReference, sandboxReceipt } from '../../shared/providers/sandbox-provider.js';
import { defineJob } from '../job-definition.js';

/**
 * Sandbox: a step after the control accepted it, the payer pays, reported exactly as the live rails would report it:
 * a mobile-money receipt, or a USDC transfer of what is still missing to the deposit address (then confirmations).
 */
export const sandboxPayJob = defineJob({
  name: 'sandbox.pay',
  async process(job, deps) {
    const intent = await loadPaymentIntent(deps.ds, job.data.intentId);
    if (!intent || intent.environment !== 'sandbox') return 'gone';
    const chain = chainFor('sandbox', deps.config);
    if (job.data.method === 'mobile_money') {
      const receipt = sandboxProviderReference('collection', `${intent.id}-pay-${job.data.key}`);
      await inUnit(deps, (unit) => recordPayment(unit, deps.config, intent.id, mobileMoneyPayment(intent, receipt, sandboxReceipt('intent', `${intent.id}-pay-${job.data.key}`)), chain));
      return receipt;
    }
    const missing = toMinor(intent.usdc_amount, USDC_SCALE) - toMinor(intent.received_amount, USDC_SCALE);
    const amount = missing > 0n ? missing : toMinor(intent.usdc_amount, USDC_SCALE);
    const hash = simulatedHash('sandbox', `intent-pay-${intent.id}-${job.data.key}`);
    await inUnit(deps, (unit) =>
      recordPayment(unit, deps.config, intent.id, {
        method: 'stablecoin', key: `${hash}-0`, currency: 'USDC', amount: fromMinor(amount, USDC_SCALE), usdcAmount: amount, reference: hash, transactionHash: hash,
      }, chain),
    );
    return hash;
  },
});
