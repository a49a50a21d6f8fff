import { inUnit } from '../../shared/db/unit-of-work.js';
import { expireSettlement } from '../../shared/domain/offramps.js';
import { loadTransaction } from '../../shared/domain/transactions.js';
import { defineJob } from '../job-definition.js';

/** At a settlement's expires_at: expired (nothing arrived: the transaction fails) or underpaid (action_required). */
export const expireSettlementJob = defineJob({
  name: 'settlement.expire',
  async process(job, deps) {
    const tx = await loadTransaction(deps.ds, job.data.transactionId);
    if (!tx) return 'gone';
    return inUnit(deps, (unit) => expireSettlement(unit, deps.config, tx));
  },
});
