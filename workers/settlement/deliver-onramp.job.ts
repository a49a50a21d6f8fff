import { inUnit } from '../../shared/db/unit-of-work.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { deliverOnramp } from '../../shared/domain/fiat-steps.js';
import { loadTransaction } from '../../shared/domain/transactions.js';
import { stepFailed } from '../../shared/domain/transaction-moves.js';
import { defineJob } from '../job-definition.js';

/** A funded on-ramp: funded -> processing -> completed, with the delivery's transaction hash. */
export const deliverOnrampJob = defineJob({
  name: 'onramp.deliver',
  async process(job, deps) {
    const tx = await loadTransaction(deps.ds, job.data.transactionId);
    if (!tx) return 'gone';
    return inUnit(deps, (unit) => deliverOnramp(unit, chainFor(tx.environment, deps.config), tx));
  },
  async onFinalFailure(job, err, deps) {
    const tx = await loadTransaction(deps.ds, job.data.transactionId);
    if (tx && ['funded', 'processing'].includes(tx.status)) await inUnit(deps, (unit) => stepFailed(unit, tx, 'funded', (err as Error).message));
  },
});
