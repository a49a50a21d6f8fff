import { inUnit } from '../../shared/db/unit-of-work.js';
import { expirePaymentIntent } from '../../shared/domain/payment-intents.js';
import { defineJob } from '../job-definition.js';

/** At expires_at an intent still awaiting payment expires; one being paid finishes first. */
export const expireIntentJob = defineJob({
  name: 'intent.expire',
  process: (job, deps) => inUnit(deps, (unit) => expirePaymentIntent(unit, job.data.intentId)),
});
