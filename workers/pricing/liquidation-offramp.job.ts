import { startLiquidationOfframp } from '../../shared/domain/liquidation-transfers.js';
import { defineJob } from '../job-definition.js';

/**
 * A transfer to a liquidation address was recorded: it is priced now and becomes its off-ramp. Out of attempts (no
 * usable rate, say), the transfer stays unpriced for the sweeper to try again; the USDC is never lost.
 */
export const liquidationOfframpJob = defineJob({
  name: 'liquidation.offramp',
  process: (job, deps) => startLiquidationOfframp(deps, deps.config, job.data.transferId),
});
