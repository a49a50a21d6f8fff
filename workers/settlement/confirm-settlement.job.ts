import { inUnit } from '../../shared/db/unit-of-work.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { confirmSettlement } from '../../shared/domain/offramps.js';
import { loadTransaction } from '../../shared/domain/transactions.js';
import { stepFailed } from '../../shared/domain/transaction-moves.js';
import { defineJob } from '../job-definition.js';

/** Counts confirmations; at the chain's required number: settlement confirmed, transaction funded, payout staged. */
export const confirmSettlementJob = defineJob({
  name: 'settlement.confirm',
  async process(job, deps) {
    return inUnit(deps, (unit) => confirmSettlement(unit, deps.config, (environment) => chainFor(environment, deps.config), job.data.transactionId, job.data.round));
  },
  async onFinalFailure(job, err, deps) {
    const tx = await loadTransaction(deps.ds, job.data.transactionId);
    if (tx && ['awaiting_funds'].includes(tx.status)) await inUnit(deps, (unit) => stepFailed(unit, tx, 'awaiting_funds', (err as Error).message));
  },
});
