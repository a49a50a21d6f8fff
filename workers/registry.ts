import { JOBS, POOLS, type JobName, type Pool } from '../shared/queues/registry.js';
import type { JobDefinition, ProcessorTable, ScheduleDefinition } from './job-definition.js';
import { cleanupOutboxJob, purgeIdempotencyJob } from './outbox/cleanup-outbox.job.js';
import { expireQuotesJob, expireSettlementsJob, sweepJob } from './sweeper/sweep.job.js';
import { refillAddressesJob } from './pricing/refill-addresses.job.js';
import { priceQuoteJob } from './pricing/price-quote.job.js';
import { expireQuoteJob } from './pricing/expire-quote.job.js';
import { submitOfframpJob } from './settlement/submit-offramp.job.js';
import { confirmSettlementJob } from './settlement/confirm-settlement.job.js';
import { expireSettlementJob } from './settlement/expire-settlement.job.js';
import { deliverOnrampJob } from './settlement/deliver-onramp.job.js';
import { refundOfframpJob } from './settlement/refund-offramp.job.js';
import { sendPayoutJob } from './providers/send-payout.job.js';
import { requestCollectionJob } from './providers/request-collection.job.js';
import { sandboxTransferJob } from './sandbox/sandbox-transfer.job.js';
import { refreshRateJob } from './pricing/refresh-rate.job.js';
import { expireIntentJob } from './pricing/expire-intent.job.js';
import { intentPayoutJob } from './pricing/intent-payout.job.js';
import { collectIntentJob } from './providers/collect-intent.job.js';
import { confirmDepositJob } from './settlement/confirm-deposit.job.js';
import { sandboxPayJob } from './sandbox/sandbox-pay.job.js';
import { deliverWebhookJob } from './webhooks/deliver-webhook.job.js';
import { scanChainJob } from './settlement/scan-chain.job.js';
import { chainReceiptJob } from './settlement/chain-receipt.job.js';
import { chainSendJob } from './settlement/chain-send.job.js';
import { sweepSettlementJob } from './settlement/sweep-settlement.job.js';
import { reconcileChainJob } from './settlement/reconcile-chain.job.js';
import { sendWithdrawalJob } from './settlement/send-withdrawal.job.js';
import { applyCallbackJob } from './providers/apply-callback.job.js';
import { checkProviderJob } from './providers/check-provider.job.js';
import { resendPayoutJob } from './providers/resend-payout.job.js';
import { refundOnrampJob } from './providers/refund-onramp.job.js';
import { liquidationOfframpJob } from './pricing/liquidation-offramp.job.js';
import { sandboxLiquidationTransferJob } from './sandbox/sandbox-liquidation-transfer.job.js';
import { CHAINS } from '../shared/domain/chains.js';
import { getConfig, type Config } from '../shared/config.js';
import { liveCurrencies } from '../shared/providers/live-rails.js';
import { rateRefreshEveryMs } from '../shared/domain/rates.js';

export type { JobDefinition, Processor, ProcessorTable, ScheduleDefinition, WorkerDeps } from './job-definition.js';

/** Rows per DELETE of the idempotency purge: each batch is its own short transaction. */
export const IDEMPOTENCY_PURGE_BATCH = 5_000;

export const DEFINITIONS: JobDefinition<any>[] = [
  cleanupOutboxJob, purgeIdempotencyJob, sweepJob, expireQuotesJob, expireSettlementsJob, refillAddressesJob, priceQuoteJob, expireQuoteJob,
  submitOfframpJob, confirmSettlementJob, expireSettlementJob, deliverOnrampJob, refundOfframpJob,
  sendPayoutJob, requestCollectionJob,
  sandboxTransferJob,
  refreshRateJob, expireIntentJob, intentPayoutJob, collectIntentJob, confirmDepositJob, sandboxPayJob,
  deliverWebhookJob, scanChainJob, chainReceiptJob, chainSendJob, sweepSettlementJob, reconcileChainJob, sendWithdrawalJob,
  applyCallbackJob, checkProviderJob, resendPayoutJob, refundOnrampJob,
  liquidationOfframpJob, sandboxLiquidationTransferJob,
];

/** A function, not a constant: importing the registry reads no configuration (a process decides first whether it reads the seeds). */
export const schedules = (config: Config = getConfig()): ScheduleDefinition[] => [
  { id: 'outbox-cleanup', everyMs: 3_600_000, name: 'outbox.cleanup', data: { olderThanHours: 24 } },
  { id: 'idempotency-purge', everyMs: 600_000, name: 'idempotency.purge', data: { olderThanSeconds: getConfig().idempotencyTtlSeconds, batch: IDEMPOTENCY_PURGE_BATCH } },
  { id: 'engine-sweep', everyMs: 15_000, name: 'engine.sweep', data: {} },
  { id: 'expiry-quotes', everyMs: 1_000, name: 'expiry.quotes', data: {} },
  { id: 'expiry-settlements', everyMs: 1_000, name: 'expiry.settlements', data: {} },
  // Addresses derived ahead of need, for each environment whose xpub is configured.
  ...(getConfig().addressPoolSize > 0
    ? (['sandbox', 'live'] as const).filter((environment) => getConfig().wallets[environment])
      .map((environment): ScheduleDefinition => ({ id: `addresses-refill-${environment}`, everyMs: 2_000, name: 'addresses.refill', data: { environment } }))
    : []),
  // The live chains' watchers (sandbox deposits arrive through the sandbox controls).
  ...CHAINS.map((chain): ScheduleDefinition => ({ id: `chain-scan-live-${chain}`, everyMs: getConfig().settlementPollMs, name: 'chain.scan', data: { environment: 'live', chain } })),
  // Each live currency's rate, refreshed well inside RATE_MAX_AGE_SECONDS, so a live request never waits on a stale one.
  ...liveCurrencies(config).map((currency): ScheduleDefinition => ({
    id: `rate-refresh-live-${currency}`, everyMs: rateRefreshEveryMs(config), name: 'rate.refresh', data: { environment: 'live', currency },
  })),
  // The ledger against the chain, for chains with an RPC configured (the others answer at once).
  ...CHAINS.map((chain): ScheduleDefinition => ({ id: `chain-reconcile-live-${chain}`, everyMs: getConfig().chainReconcileMs, name: 'chain.reconcile', data: { environment: 'live', chain } })),
];

export interface PoolSpec {
  concurrency: number;
  processors: ProcessorTable;
}

// Webhook deliveries mostly wait on the network; each endpoint gets at most WEBHOOK_ENDPOINT_CONCURRENCY of these, each
// business WEBHOOK_BUSINESS_CONCURRENCY.
const CONCURRENCY: Record<Pool, number> = { pricing: 20, settlement: 10, providers: 20, sandbox: 50, webhooks: 50 };

/** Pool -> its processors (one queue per pool, jobs told apart by name). A job without a processor fails loudly. */
export const REGISTRY: Record<Pool, PoolSpec> = Object.fromEntries(
  POOLS.map((pool) => [
    pool,
    {
      concurrency: CONCURRENCY[pool],
      processors: Object.fromEntries(DEFINITIONS.filter((d) => JOBS[d.name as JobName].queue === pool).map((d) => [d.name, d.process])),
    },
  ]),
) as Record<Pool, PoolSpec>;

export const FINAL_FAILURES: Map<JobName, NonNullable<JobDefinition<any>['onFinalFailure']>> = new Map(
  DEFINITIONS.filter((d) => d.onFinalFailure).map((d) => [d.name as JobName, d.onFinalFailure!]),
);

// Every job has exactly one definition: a job name without a processor would sit in its queue for ever.
for (const name of Object.keys(JOBS) as JobName[]) {
  const count = DEFINITIONS.filter((d) => d.name === name).length;
  if (count !== 1) throw new Error(`job ${name} has ${count} definitions; it needs exactly one`);
}
