import { getAddress, type Hex } from 'viem';
import { scanClientFor } from '../../shared/chain/clients.js';
import { applyReceipt } from '../../shared/chain/scanner.js';
import { defineJob } from '../job-definition.js';

/** A transfer the business told us about: its receipt read at once, instead of waiting for the next scan. */
export const chainReceiptJob = defineJob({
  name: 'chain.receipt',
  async process(job, deps) {
    const { environment, chain, transactionHash } = job.data;
    const matched = await applyReceipt(deps, {
      environment, chain, client: scanClientFor(deps.config, chain), token: getAddress(deps.config.chains[chain].usdcAddress), transactionHash: transactionHash as Hex,
    });
    return { matched };
  },
});
