import type { RecordRef } from '../db/idempotency-records.js';

// One registry of queues (one per worker pool) and of every job: its queue, payload type, attempts and backoff.
// Jobs carry ids only; the worker reloads the row from Postgres. Processors and final-failure handlers are the
// workers' half of each definition (workers/registry.ts).

export const POOLS = ['pricing', 'settlement', 'providers', 'sandbox', 'webhooks'] as const;
export type Pool = (typeof POOLS)[number];
export type QueueName = Pool;

/** Every job the system runs: name -> payload. */
export interface JobPayloads {
  /** Bookkeeping: removes outbox rows that were dispatched long ago. */
  'outbox.cleanup': { olderThanHours: number };
  /** Bookkeeping: deletes idempotency records past their retention, `batch` rows per statement. */
  'idempotency.purge': { olderThanSeconds: number; batch: number };
  /** Derives managed-wallet and deposit addresses ahead of need, up to ADDRESS_POOL_SIZE for the environment. */
  'addresses.refill': { environment: 'sandbox' | 'live' };
  /** Finds rows stuck in a pending state and enqueues their job again (same deterministic id). */
  'engine.sweep': Record<string, never>;
  /** Every second: enqueues the expiry of each available quote whose expires_at has passed (no delayed job per quote). */
  'expiry.quotes': Record<string, never>;
  /** Every second: the same for settlements still awaiting their transfer past their expires_at. */
  'expiry.settlements': Record<string, never>;
  /** Prices a pending quote; `answers`: the record of the POST /quotes waiting for it, whose answer it writes (recordReplace). */
  'quote.price': { quoteId: string; answers?: RecordRef };
  /** Moves an available quote to expired at its expires_at. */
  'quote.expire': { quoteId: string };
  /** Managed-wallet off-ramp: sign and submit the transfer to the deposit address. */
  'offramp.submit': { transactionId: string };
  /** Counts a settlement's confirmations; `round` keeps each check its own job. */
  'settlement.confirm': { transactionId: string; round: number };
  /** At a settlement's expires_at: expired (nothing received) or underpaid. */
  'settlement.expire': { transactionId: string };
  /** Pays a funded off-ramp out through the fiat provider. */
  'payout.send': { transactionId: string };
  /** Asks the fiat provider to collect an on-ramp's payment. */
  'collection.request': { transactionId: string };
  /** Sends a funded on-ramp's USDC to its wallet. */
  'onramp.deliver': { transactionId: string };
  /** Fetches a currency's rate from the source and stores it (payment intents are priced from the stored rate). */
  'rate.refresh': { environment: 'sandbox' | 'live'; currency: string };
  /** At a payment intent's expires_at: expired, if it is still awaiting payment. */
  'intent.expire': { intentId: string };
  /** Prompts a payment intent's payer (STK Push in live); each prompt is its own attempt. */
  'intent.collect': { intentId: string; attempt: number };
  /** A paid intent with a beneficiary: prices and starts its payout from the treasury. */
  'intent.payout': { intentId: string };
  /** Counts a USDC treasury deposit's confirmations; `round` keeps each check its own job. */
  'deposit.confirm': { depositId: string; round: number };
  /** Sandbox: the payer of a payment intent pays, by mobile money or USDC. */
  'sandbox.pay': { intentId: string; method: 'mobile_money' | 'stablecoin'; key: string };
  /** One attempt at delivering an event to one endpoint; `round` counts redeliveries, `attempt` the tries of a round. */
  /** endpointId: the message's endpoint, so a delivery that must wait for its endpoint's slot reads nothing first (older jobs lack it). */
  'webhook.deliver': { messageId: string; round: number; attempt: number; endpointId?: string };
  /** Reads a chain's USDC transfers since its cursor and records those to our deposit addresses. */
  'chain.scan': { environment: 'sandbox' | 'live'; chain: 'base' | 'polygon' | 'arbitrum' | 'optimism' | 'avalanche' };
  /** The business named the hash of its transfer: its receipt is read and its transfers to our addresses recorded. */
  'chain.receipt': { environment: 'sandbox' | 'live'; chain: 'base' | 'polygon' | 'arbitrum' | 'optimism' | 'avalanche'; transactionHash: string };
  /** A stored provider callback (M-Pesa Daraja) is applied to what it concerns. */
  'provider.callback': { callbackId: string };
  /** No result came in time: the provider is asked (STK Query, Transaction Status); `round` keeps each ask its own job. */
  'provider.check': { transactionId: string; round: number; after: string } | { intentId: string; attempt: number; round: number; series?: number };
  /** M-Pesa answered a payout with a temporary result: the request is made again (`send` counts them). */
  'payout.resend': { transactionId: string; send: number };
  /**
   * Live: the treasury hot wallet sends the USDC recorded (chain_sends, planned by the deciding unit) under `reference`,
   * then its subject records it. Purpose and subject are for the sweeper's look-ups; the job reads all it acts on from the row.
   */
  'chain.send': {
    environment: 'sandbox' | 'live'; chain: 'base' | 'polygon' | 'arbitrum' | 'optimism' | 'avalanche'; reference: string;
  } & ({ purpose: 'onramp_delivery' | 'refund'; transactionId: string } | { purpose: 'withdrawal'; withdrawalId: string });
  /** A treasury withdrawal is sent: the sandbox credits the wallet at once; live stages the hot wallet's chain.send. */
  'withdrawal.send': { withdrawalId: string };
  /** Live: a confirmed deposit address's USDC goes to the treasury hot wallet (gas topped up first); `round` names the deposit swept. */
  'settlement.sweep': { kind: 'settlement' | 'payment_intent'; id: string; round: string };
  /** Live: each managed wallet's and the hot wallet's on-chain USDC compared with what the ledger says it holds. */
  'chain.reconcile': { environment: 'sandbox' | 'live'; chain: 'base' | 'polygon' | 'arbitrum' | 'optimism' | 'avalanche' };
  /** USDC an off-ramp holds and no longer needs goes back: the excess of a completed one, or an underpaid or late deposit past AUTO_REFUND_AFTER_SECONDS. */
  'offramp.refund': { transactionId: string };
  /** An on-ramp whose delivery failed for good pays the collected fiat back to its payer (our transaction id is the payout's reference). */
  'onramp.refund': { transactionId: string };
  /** Sandbox: the business's on-chain transfer to a deposit address (already debited) reaches the chain watcher. */
  'sandbox.transfer': { settlementId: string; transactionHash: string };
  /** A transfer to a liquidation address, recorded: priced now into its off-ramp to the address's beneficiary. */
  'liquidation.offramp': { transferId: string };
  /** Sandbox: a transfer from the fixed sandbox sender to a liquidation address reaches the chain watcher. */
  'sandbox.liquidation_transfer': { liquidationAddressId: string; transactionHash: string };
}
export type JobName = keyof JobPayloads;

export interface JobSpec {
  queue: QueueName;
  /** Attempts in all, the first included; `provider`: PROVIDER_MAX_ATTEMPTS. */
  attempts: number | 'provider';
  /** Exponential backoff from this delay; `provider`: PROVIDER_RETRY_BASE_MS. */
  backoffMs: number | 'provider';
}

export const JOBS: { [N in JobName]: JobSpec } = {
  'outbox.cleanup': { queue: 'webhooks', attempts: 3, backoffMs: 60_000 },
  'idempotency.purge': { queue: 'webhooks', attempts: 3, backoffMs: 60_000 },
  'addresses.refill': { queue: 'pricing', attempts: 1, backoffMs: 1000 },
  'engine.sweep': { queue: 'pricing', attempts: 1, backoffMs: 1000 },
  // Scheduled every second: a failed one is simply the next one.
  'expiry.quotes': { queue: 'pricing', attempts: 1, backoffMs: 1000 },
  'expiry.settlements': { queue: 'settlement', attempts: 1, backoffMs: 1000 },
  'quote.price': { queue: 'pricing', attempts: 5, backoffMs: 200 },
  'quote.expire': { queue: 'pricing', attempts: 8, backoffMs: 1000 },
  'offramp.submit': { queue: 'settlement', attempts: 8, backoffMs: 500 },
  'settlement.confirm': { queue: 'settlement', attempts: 8, backoffMs: 500 },
  'settlement.expire': { queue: 'settlement', attempts: 8, backoffMs: 1000 },
  'payout.send': { queue: 'providers', attempts: 'provider', backoffMs: 'provider' },
  'collection.request': { queue: 'providers', attempts: 'provider', backoffMs: 'provider' },
  'onramp.deliver': { queue: 'settlement', attempts: 8, backoffMs: 500 },
  'offramp.refund': { queue: 'settlement', attempts: 8, backoffMs: 1000 },
  'sandbox.transfer': { queue: 'sandbox', attempts: 5, backoffMs: 200 },
  'rate.refresh': { queue: 'pricing', attempts: 3, backoffMs: 200 },
  'intent.expire': { queue: 'pricing', attempts: 8, backoffMs: 1000 },
  'intent.collect': { queue: 'providers', attempts: 'provider', backoffMs: 'provider' },
  'intent.payout': { queue: 'pricing', attempts: 5, backoffMs: 500 },
  'liquidation.offramp': { queue: 'pricing', attempts: 5, backoffMs: 500 },
  'sandbox.liquidation_transfer': { queue: 'sandbox', attempts: 5, backoffMs: 200 },
  'deposit.confirm': { queue: 'settlement', attempts: 8, backoffMs: 500 },
  'sandbox.pay': { queue: 'sandbox', attempts: 5, backoffMs: 200 },
  // Its own retry schedule (WEBHOOK_RETRY_SCHEDULE_MS) is a new job per attempt; these attempts cover a failing database.
  'webhook.deliver': { queue: 'webhooks', attempts: 5, backoffMs: 1000 },
  // A scheduled scan: a failed one is simply the next one.
  'chain.scan': { queue: 'settlement', attempts: 1, backoffMs: 1000 },
  // The subject's own unit may not have committed when its callback arrives: a few quick retries.
  'provider.callback': { queue: 'providers', attempts: 6, backoffMs: 250 },
  'provider.check': { queue: 'providers', attempts: 'provider', backoffMs: 'provider' },
  'payout.resend': { queue: 'providers', attempts: 'provider', backoffMs: 'provider' },
  // Temporary refusals: retried with backoff; past them the refund stays pending and the sweeper stages it again.
  'onramp.refund': { queue: 'providers', attempts: 'provider', backoffMs: 'provider' },
  // Not mined yet: asked again (2 s, 4 s, ... about 2 minutes in all); the scan finds it anyway.
  'chain.receipt': { queue: 'settlement', attempts: 7, backoffMs: 2000 },
  // Not mined within a wait, or the RPC down: asked again (1 s, 2 s, ... about 9 hours in all); the send is never repeated.
  'chain.send': { queue: 'settlement', attempts: 16, backoffMs: 1000 },
  'settlement.sweep': { queue: 'settlement', attempts: 16, backoffMs: 1000 },
  'withdrawal.send': { queue: 'settlement', attempts: 8, backoffMs: 500 },
  'chain.reconcile': { queue: 'settlement', attempts: 1, backoffMs: 1000 },
};

/** Which queue each job runs on. */
export const JOB_QUEUES: { [N in JobName]: QueueName } = Object.fromEntries(Object.entries(JOBS).map(([name, spec]) => [name, spec.queue])) as {
  [N in JobName]: QueueName;
};

/** Deterministic ids: the same business fact always maps to the same job, so a second enqueue is a no-op. */
export function jobId(name: JobName, ...parts: string[]): string {
  // BullMQ refuses ':' in custom ids (it separates its own keys): a programming error, caught before any write.
  if (parts.some((p) => p.includes(':') || p === '')) throw new Error(`job id parts must be non-empty and free of ':' (${name})`);
  return [name.replace(/\./g, '-'), ...parts].join('-');
}

export function isPool(value: string): value is Pool {
  return (POOLS as readonly string[]).includes(value);
}
