import type { DataSource, EntityManager } from 'typeorm';
import type { JobRequest } from '../queues/producer.js';
import { quoteJobs } from './quotes.js';
import { jobForStep, txJobs } from './lifecycle-jobs.js';
import type { Environment } from './chains.js';

// What the sweeper looks for: rows stuck in a state whose job should have moved them (the job never reached Redis,
// Redis lost it, it failed for good without a handler). Each rule finds them by age and names the job, with the same
// deterministic id, that moves them on. Later resources add their rules here.
export interface StuckRule {
  name: string;
  find(q: Pick<DataSource | EntityManager, 'query'>, limit: number): Promise<JobRequest[]>;
}

const STALE_AFTER_SECONDS = 10;
/** A transaction step that has not moved for this long has lost its job (steps take milliseconds to seconds). */
const TRANSACTION_STALE_SECONDS = 60;

interface StuckTransaction {
  id: string;
  retry_count: number;
  environment: Environment;
  direction: 'offramp' | 'onramp';
  status: string;
  funding_type: string | null;
}

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
  {
    name: 'transactions whose step job was lost',
    async find(q, limit) {
      const rows: StuckTransaction[] = await q.query(
        `SELECT id, retry_count, environment, direction, status, funding_type FROM transactions
          WHERE status IN ('created', 'signing', 'awaiting_funds', 'funded') AND updated_at < now() - make_interval(secs => $1) ORDER BY updated_at LIMIT $2`,
        [TRANSACTION_STALE_SECONDS, limit],
      );
      return rows.map((tx) => jobForStep(tx, tx.status, 0, 0)).filter((j): j is JobRequest => j !== null);
    },
  },
  {
    name: 'settlements past their expiry',
    async find(q, limit) {
      const rows: { transaction_id: string }[] = await q.query(
        `SELECT transaction_id FROM settlements WHERE status = 'awaiting_transfer' AND expires_at < now() - make_interval(secs => $1) ORDER BY expires_at LIMIT $2`,
        [STALE_AFTER_SECONDS, limit],
      );
      return rows.map((r) => txJobs.expire(r.transaction_id, 0));
    },
  },
];
