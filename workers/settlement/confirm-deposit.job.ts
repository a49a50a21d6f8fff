import { inUnit } from '../../shared/db/unit-of-work.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { confirmDepositStep } from '../../shared/domain/treasury-deposits.js';
import { defineJob } from '../job-definition.js';

/** Counts a USDC deposit's confirmations; at the chain's required number it is confirmed (and its intent may complete). */
export const confirmDepositJob = defineJob({
  name: 'deposit.confirm',
  async process(job, deps) {
    const [row]: { environment: 'sandbox' | 'live' }[] = await deps.ds.query(`SELECT environment FROM treasury_deposits WHERE id = $1`, [job.data.depositId]);
    if (!row) return 'gone';
    return inUnit(deps, (unit) => confirmDepositStep(unit, deps.config, chainFor(row.environment, deps.config), job.data.depositId, job.data.round));
  },
});
