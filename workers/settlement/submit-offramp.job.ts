import { inUnit } from '../../shared/db/unit-of-work.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { submitOfframp } from '../../shared/domain/offramps.js';
import { loadTransaction } from '../../shared/domain/transactions.js';
import { stepFailed } from '../../shared/domain/transaction-moves.js';
import { defineJob } from '../job-definition.js';

/** Managed-wallet off-ramp: created -> signing -> submitting -> awaiting_funds (or action_required, short of USDC). */
export const submitOfframpJob = defineJob({
  name: 'offramp.submit',
  async process(job, deps) {
    return submitOfframp(deps, (environment) => chainFor(environment, deps.config), job.data.transactionId);
  },
  async onFinalFailure(job, err, deps) {
    const tx = await loadTransaction(deps.ds, job.data.transactionId);
    if (tx && ['created', 'signing', 'submitting'].includes(tx.status)) await inUnit(deps, (unit) => stepFailed(unit, tx, 'signing', (err as Error).message));
  },
});
