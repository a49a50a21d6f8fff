import { inUnit } from '../../shared/db/unit-of-work.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { observeTransfer } from '../../shared/domain/offramps.js';
import { loadSettlement } from '../../shared/domain/settlements.js';
import { defineJob } from '../job-definition.js';

/**
 * Sandbox: a step after the control accepted it (and debited the external wallet's simulated balance), the business's
 * transfer is observed exactly as the live chain watcher would report it.
 */
export const sandboxTransferJob = defineJob({
  name: 'sandbox.transfer',
  async process(job, deps) {
    const settlement = await loadSettlement(deps.ds, job.data.settlementId);
    if (!settlement || settlement.environment !== 'sandbox') return 'gone';
    const transfer = { transactionHash: job.data.transactionHash, logIndex: 0, amount: toMinor(job.data.amount, USDC_SCALE) };
    await inUnit(deps, (unit) => observeTransfer(unit, deps.config, settlement, transfer, undefined, chainFor('sandbox', deps.config)));
    return job.data.transactionHash;
  },
});
