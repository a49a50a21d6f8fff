import { reconcileChain } from '../../shared/chain/reconcile.js';
import { defineJob } from '../job-definition.js';

/** Scheduled: the ledger and the chain compared for every managed wallet and the hot wallet (CHAIN_RECONCILE_MS). */
export const reconcileChainJob = defineJob({
  name: 'chain.reconcile',
  async process(job, deps) {
    const result = await reconcileChain(deps, job.data.environment, job.data.chain);
    if (result === 'not configured') return result;
    const drifted = result.filter((d) => d.drift !== 0n);
    return { addresses: result.length, drifted: drifted.length };
  },
});
