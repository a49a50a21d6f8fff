import { getAddress } from 'viem';
import { scanClientFor } from '../../shared/chain/clients.js';
import { scanChain, WATCHED_SETTLEMENT_STATUSES } from '../../shared/chain/scanner.js';
import { defineJob } from '../job-definition.js';
import { scanLagBlocks } from '../../shared/metrics.js';

/**
 * The settlement watcher: one scheduled scan per chain (a BullMQ job scheduler, so extra settlement dynos never scan
 * twice). A chain with no deposit address to watch costs one query and no RPC call.
 */
export const scanChainJob = defineJob({
  name: 'chain.scan',
  async process(job, deps) {
    const { environment, chain } = job.data;
    const [{ open }]: { open: boolean }[] = await deps.ds.query(
      `SELECT EXISTS (SELECT 1 FROM settlements WHERE environment = $1 AND chain = $2 AND status = ANY($3::text[]))
           OR EXISTS (SELECT 1 FROM payment_intents WHERE environment = $1 AND chain = $2 AND status IN ('awaiting_payment', 'processing')) AS open`,
      [environment, chain, [...WATCHED_SETTLEMENT_STATUSES].filter((s) => s !== 'confirmed' && s !== 'expired')],
    );
    if (!open) return 'nothing open';
    const result = await scanChain(deps, {
      environment, chain, client: scanClientFor(deps.config, chain), token: getAddress(deps.config.chains[chain].usdcAddress), maxRange: BigInt(deps.config.settlementMaxBlockRange),
    });
    const lag = result.head > result.to ? result.head - result.to : 0n;
    scanLagBlocks.set({ environment, chain }, Number(lag));
    return { from: result.from.toString(), to: result.to.toString(), logs: result.logs, matched: result.matched, lag: Number(lag) };
  },
});
