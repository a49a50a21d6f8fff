import { sendWithdrawal } from '../../shared/domain/treasury-withdrawals.js';
import { defineJob } from '../job-definition.js';

/**
 * A pending treasury withdrawal is sent (sandbox: completed at once; live: the hot wallet's chain.send is staged).
 * One that runs out of attempts stays pending, for the sweeper to stage again: the debit is never stranded.
 */
export const sendWithdrawalJob = defineJob({
  name: 'withdrawal.send',
  process: (job, deps) => sendWithdrawal(deps, deps.config, job.data.withdrawalId),
  async onFinalFailure(job, err, deps) {
    deps.log.error({ withdrawal_id: job.data.withdrawalId, err: (err as Error).message }, 'a treasury withdrawal could not be sent yet; the sweeper will try again');
  },
});
