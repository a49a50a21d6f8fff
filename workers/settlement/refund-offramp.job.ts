import { inUnit } from '../../shared/db/unit-of-work.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { returnHeldFunds } from '../../shared/domain/refunds.js';
import { loadTransaction } from '../../shared/domain/transactions.js';
import { defineJob } from '../job-definition.js';

/** When an off-ramp's refund falls due: the excess of a completed one, or what an underpaid or late deposit left it holding. */
export const refundOfframpJob = defineJob({
  name: 'offramp.refund',
  async process(job, deps) {
    const tx = await loadTransaction(deps.ds, job.data.transactionId);
    if (!tx) return 'gone';
    return inUnit(deps, (unit) => returnHeldFunds(unit, chainFor(tx.environment, deps.config), tx.id));
  },
});
