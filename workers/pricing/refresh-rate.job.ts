import { freshRateFromSource } from '../../shared/domain/rates.js';
import { defineJob } from '../job-definition.js';

/** Reads a currency's rate from the source and stores it; a request waiting for it reads the stored rate. */
export const refreshRateJob = defineJob({
  name: 'rate.refresh',
  async process(job, deps) {
    return (await freshRateFromSource(deps.ds, deps.config, job.data.environment, job.data.currency, deps.redis, { storeAlways: true })).rate;
  },
});
