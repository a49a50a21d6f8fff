import { DelayedError } from 'bullmq';
import { AwaitingRate, startLiquidationOfframp } from '../../shared/domain/liquidation-transfers.js';
import { defineJob } from '../job-definition.js';

/**
 * A transfer to a liquidation address was recorded: it is priced now and becomes its off-ramp. Without a fresh rate
 * the job steps back to wait (not an attempt) and asks again, until the rate returns or the transfer's deadline
 * sends it back to its sender; a lost job is staged again by the sweeper. The USDC is never lost.
 */
export const liquidationOfframpJob = defineJob({
  name: 'liquidation.offramp',
  async process(job, deps) {
    try {
      return await startLiquidationOfframp(deps, deps.config, job.data.transferId);
    } catch (err) {
      if (!(err instanceof AwaitingRate) || !deps.token) throw err;
      await job.moveToDelayed(Date.now() + err.retryInMs, deps.token);
      throw new DelayedError();
    }
  },
});
