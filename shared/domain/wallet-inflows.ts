import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { inUnit, type UnitDeps } from '../db/unit-of-work.js';
import { chainFor } from '../chain/sandbox-chain.js';
import type { Chain, Environment } from './chains.js';
import { paymentDepth } from './confirmations.js';
import type { ChainInflowStatus } from './machines.js';
import { apply } from '../kernel/apply.js';
import { decideInflow, type InflowSnapshot } from '../kernel/chain-records.js';

// USDC that reaches a managed wallet (or the treasury hot wallet) from outside, as the watcher saw it: recorded
// `pending` with its block, and credited to the wallet's ledger account only once it is as deep as the chain's
// confirmations and its block is still on the canonical chain (the rule every payment follows, confirmations.ts).
// One whose block a reorg took is `reorged` and credits nothing; if it is mined again, the watcher sees it again and
// it is pending once more. The hot wallet's inflows are only recorded (the reconciliation reads them), never booked.

interface PendingInflow {
  id: string;
  kind: 'managed_wallet' | 'treasury';
  wallet_id: string | null;
  business_id: string | null;
  transaction_hash: string;
  log_index: number;
  amount: string;
  block_number: string;
  block_hash: string | null;
  observed_at: Date;
  from_address: string | null;
}

/** One pass over the chain's pending inflows (each scan): credits those deep enough, drops those a reorg took. */
export async function confirmInflows(deps: UnitDeps & { config: Config; log: Logger }, environment: Environment, chain: Chain): Promise<{ credited: number; reorged: number }> {
  const done = { credited: 0, reorged: 0 };
  // Cheap when there is nothing to look at: one query on a partial index, no RPC call.
  const rows: PendingInflow[] = await deps.ds.query(
    `SELECT i.id, i.kind, i.wallet_id, w.business_id, i.transaction_hash, i.log_index, i.amount::text, i.block_number::text, i.block_hash, i.observed_at, i.from_address
       FROM chain_inflows i LEFT JOIN wallets w ON w.id = i.wallet_id
      WHERE i.environment = $1 AND i.chain = $2 AND i.status = 'pending' ORDER BY i.block_number LIMIT 200`,
    [environment, chain],
  );
  if (!rows.length) return done;
  const adapter = chainFor(environment, deps.config);
  const required = deps.config.chains[chain].confirmations;
  for (const row of rows) {
    const depth = await paymentDepth(adapter, chain, [row], required, row.observed_at);
    if (depth.state === 'unknown') continue; // the chain could not be read: counted again next scan
    if (depth.state !== 'reorged' && !depth.deep) continue;
    // Decided on the row as locked (kernel/chain-records.ts), moved by a compare-and-set from pending, booked with it.
    const outcome = await inUnit(deps, async (unit) => {
      const [locked]: { status: ChainInflowStatus }[] = await unit.em.query(`SELECT status FROM chain_inflows WHERE id = $1 FOR UPDATE`, [row.id]);
      if (!locked) return 'gone';
      const decided = decideInflow(snapshotOf(row, locked.status, environment, chain), { kind: depth.state === 'reorged' ? 'reorged' : 'deep' });
      await apply(unit, decided, new Map());
      return decided.outcome;
    });
    if (outcome === 'reorged') {
      deps.log.warn({ chain, environment, transaction_hash: row.transaction_hash, wallet_id: row.wallet_id }, 'a reorg took an inflow off the chain before it was deep enough; nothing credited');
      done.reorged++;
    }
    if (outcome === 'credited') done.credited++;
  }
  return done;
}

function snapshotOf(row: PendingInflow, status: ChainInflowStatus, environment: Environment, chain: Chain): InflowSnapshot {
  return {
    id: row.id, status, environment, chain, kind: row.kind, walletId: row.wallet_id, businessId: row.business_id,
    transactionHash: row.transaction_hash, logIndex: row.log_index, amount: BigInt(row.amount), from: row.from_address,
  };
}
