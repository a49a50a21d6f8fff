import type { DataSource, EntityManager } from 'typeorm';
import type { JobRequest } from '../queues/producer.js';
import { quoteJobs } from './quotes.js';

// What the sweeper looks for: rows stuck in a state whose job should have moved them (the job never reached Redis,
// Redis lost it, it failed for good without a handler). Each rule finds them by age and names the job, with the same
// deterministic id, that moves them on. Later resources add their rules here.
export interface StuckRule {
  name: string;
  find(q: Pick<DataSource | EntityManager, 'query'>, limit: number): Promise<JobRequest[]>;
}

const STALE_AFTER_SECONDS = 10;

export const STUCK_RULES: StuckRule[] = [
  {
    name: 'quotes pending without a price',
    async find(q, limit) {
      const rows: { id: string }[] = await q.query(
        `SELECT id FROM quotes WHERE status = 'pending' AND created_at < now() - make_interval(secs => $1) ORDER BY created_at LIMIT $2`,
        [STALE_AFTER_SECONDS, limit],
      );
      return rows.map((r) => quoteJobs.price(r.id));
    },
  },
  {
    name: 'quotes available past their expiry',
    async find(q, limit) {
      const rows: { id: string }[] = await q.query(
        `SELECT id FROM quotes WHERE status = 'available' AND expires_at < now() - make_interval(secs => $1) ORDER BY expires_at LIMIT $2`,
        [STALE_AFTER_SECONDS, limit],
      );
      return rows.map((r) => quoteJobs.expire(r.id, 0));
    },
  },
];
