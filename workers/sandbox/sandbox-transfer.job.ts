import { inUnit } from '../../shared/db/unit-of-work.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { bookedTo } from '../../shared/domain/ledger.js';
import { observeTransfer } from '../../shared/domain/offramps.js';
import { loadSettlement } from '../../shared/domain/settlements.js';
import { defineJob } from '../job-definition.js';

/**
 * Sandbox: a step after the control accepted it (and debited the external wallet's simulated balance), the business's
 * transfer is observed exactly as the live chain watcher would report it. The job names the transfer; its amount is
 * what the control booked under that hash (CONTRACT §18: a job carries references, never money).
 */
export const sandboxTransferJob = defineJob({
  name: 'sandbox.transfer',
  async process(job, deps) {
    const settlement = await loadSettlement(deps.ds, job.data.settlementId);
    if (!settlement || settlement.environment !== 'sandbox') return 'gone';
    const scope = { businessId: settlement.business_id, environment: settlement.environment };
    const amount = await bookedTo(deps.ds, scope, `deposit-${settlement.id}-${job.data.transactionHash}`, 'settlement_clearing');
    if (amount === null) return 'no such transfer';
    const transfer = { transactionHash: job.data.transactionHash, logIndex: 0, amount };
    await inUnit(deps, (unit) => observeTransfer(unit, deps.config, settlement, transfer, undefined, chainFor('sandbox', deps.config)));
    return job.data.transactionHash;
  },
});
