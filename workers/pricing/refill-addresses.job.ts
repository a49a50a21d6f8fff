import { refillAddressPool } from '../../shared/chain/address-pool.js';
import { defineJob } from '../job-definition.js';

/** Keeps ADDRESS_POOL_SIZE addresses of the environment's xpub derived, so creates claim one instead of deriving it. */
export const refillAddressesJob = defineJob({
  name: 'addresses.refill',
  async process(job, deps) {
    const wallet = deps.config.wallets[job.data.environment];
    if (!wallet || deps.config.addressPoolSize === 0) return 'not configured';
    return { derived: await refillAddressPool(deps.ds, job.data.environment, wallet.xpub, deps.config.addressPoolSize) };
  },
});
