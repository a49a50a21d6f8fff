import { getAddress } from 'viem';
import { scanClientFor } from '../../shared/chain/clients.js';
import { OPEN_SETTLEMENT_STATUSES, scanChain } from '../../shared/chain/scanner.js';
import { recheckSends } from '../../shared/chain/sender.js';
import { confirmInflows } from '../../shared/domain/wallet-inflows.js';
import { defineJob, type WorkerDeps } from '../job-definition.js';
import type { Chain, Environment } from '../../shared/domain/chains.js';
import { scanLagBlocks } from '../../shared/metrics.js';
import { withLease } from '../../shared/queues/lease.js';

/**
 * The scheduler starts one scan per interval, but a scan longer than the interval would meet the next: a lease says
 * no. Renewed while the scan runs, so a scanner killed mid-scan holds the chain's watching up for this long at most.
 */
export const SCAN_LEASE_MS = 5_000;
export const SKIPPED_SCAN = 'another scan of this chain is running';

/**
 * The settlement watcher: one scheduled scan per chain (a BullMQ job scheduler, so extra settlement dynos never scan
 * twice). A chain with no deposit address to watch costs one query and no RPC call.
 */
export const scanChainJob = defineJob({
  name: 'chain.scan',
  async process(job, deps) {
    const { environment, chain } = job.data;
    // Called without the pool's Redis (a test driving the processor directly): nothing to coordinate with.
    if (!deps.redis) return scanOnce(deps, environment, chain);
    const started = Date.now();
    const leased = await withLease(deps.redis, `${deps.config.redisPrefix}:chain-scan:${environment}:${chain}`, SCAN_LEASE_MS, () => scanOnce(deps, environment, chain));
    // When the scan held the chain, for operators (Bull Board shows it) and for the test that no two ever overlap.
    return leased.ran ? { outcome: leased.value, ran: [started, Date.now()] } : SKIPPED_SCAN;
  },
});

/** Whether a chain has anything to watch ($1 environment, $2 chain, $3 LATE_DEPOSIT_WATCH_SECONDS); see scanOnce. */
export const ANYTHING_OPEN =
  `SELECT EXISTS (SELECT 1 FROM settlements WHERE environment = $1 AND chain = $2 AND status IN (${OPEN_SETTLEMENT_STATUSES.map((s) => `'${s}'`).join(', ')}))
   OR EXISTS (SELECT 1 FROM payment_intents WHERE environment = $1 AND chain = $2 AND status IN ('awaiting_payment', 'processing'))
   OR EXISTS (SELECT 1 FROM liquidation_addresses WHERE environment = $1 AND chain = $2)
   OR EXISTS (SELECT 1 FROM settlements WHERE environment = $1 AND chain = $2 AND updated_at > now() - make_interval(secs => $3))
   OR EXISTS (SELECT 1 FROM payment_intents WHERE environment = $1 AND chain = $2 AND updated_at > now() - make_interval(secs => $3)) AS open`;

async function scanOnce(deps: WorkerDeps, environment: Environment, chain: Chain): Promise<unknown> {
  // Our own sends first (whether or not an address is open): one still in flight whose job is gone is settled, a
  // mined one a reorg took is sent again.
  // Only where the chain's RPC is configured: a send is made only there.
  const sends = deps.config.chains[chain].rpcUrl ? await recheckSends(deps, environment, chain) : null;
  // Outside funding of managed wallets seen earlier: credited once deep enough, dropped when a reorg took it.
  const inflows = deps.config.chains[chain].rpcUrl ? await confirmInflows(deps, environment, chain) : null;
  // Open addresses, and for LATE_DEPOSIT_WATCH_SECONDS those that closed: a transfer sent after an address closed (a
  // late deposit, an overpayment) is recorded and given its exit even when nothing else on the chain is open. A
  // liquidation address is permanent: a chain with one (archived too: its transfers go back) is always scanned.
  // Each EXISTS runs only when those before it found nothing: the open ones first, through their partial indexes (the
  // statuses written out, so the index's condition is seen to hold), then the recently closed ones, through the
  // (environment, chain, updated_at) indexes (a read of the whole tables before: 2.2 s beside a million transactions).
  const [{ open }]: { open: boolean }[] = await deps.ds.query(ANYTHING_OPEN, [environment, chain, deps.config.lateDepositWatchSeconds]);
  if (!open) return 'nothing open';
  const result = await scanChain(deps, {
    environment, chain, client: scanClientFor(deps.config, chain), token: getAddress(deps.config.chains[chain].usdcAddress), maxRange: BigInt(deps.config.settlementMaxBlockRange),
  });
  const lag = result.head > result.to ? result.head - result.to : 0n;
  scanLagBlocks.set({ environment, chain }, Number(lag));
  return { from: result.from.toString(), to: result.to.toString(), logs: result.logs, matched: result.matched, lag: Number(lag), sends, inflows };
}
