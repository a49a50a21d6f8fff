import { inUnit } from '../../shared/db/unit-of-work.js';
import { loadQuote, markExpired } from '../../shared/domain/quotes.js';
import { defineJob } from '../job-definition.js';

/** available -> expired at expires_at (enqueued by expiry.quotes once due; the view already shows expired from that instant). */
export const expireQuoteJob = defineJob({
  name: 'quote.expire',
  async process(job, deps) {
    const row = await loadQuote(deps.ds, job.data.quoteId);
    if (!row) return 'gone';
    return (await inUnit(deps, (unit) => markExpired(unit, row))) ? 'expired' : 'unchanged';
  },
});
