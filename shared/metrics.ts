// Prometheus metrics of this process (prom-client), served by the web process at /metrics and by each worker process
// on WORKER_METRICS_PORT, both behind the operators' basic auth. Recording is cheap by design: a request costs one
// histogram observation; queue depths are read from Redis only when Prometheus scrapes.
import client from 'prom-client';
import type { Queues } from './queues/producer.js';

export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry, prefix: 'rampway_' });

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Requests by method, route template (never the raw path: ids would explode the series) and status. */
export const httpDuration = new client.Histogram({
  name: 'rampway_http_request_duration_seconds',
  help: 'HTTP requests by method, route template and status: count (rate) and latency.',
  labelNames: ['method', 'route', 'status'] as const,
  buckets: SECONDS,
  registers: [registry],
});

export const jobDuration = new client.Histogram({
  name: 'rampway_job_duration_seconds',
  help: 'Jobs run by the worker pools, by queue, job name and outcome (completed, failed, delayed).',
  labelNames: ['queue', 'job', 'outcome'] as const,
  buckets: SECONDS,
  registers: [registry],
});

export const jobFailures = new client.Counter({
  name: 'rampway_job_failures_total',
  help: 'Failed job attempts by queue and job name; final="true" when the job will not run again.',
  labelNames: ['queue', 'job', 'final'] as const,
  registers: [registry],
});

export const providerDuration = new client.Histogram({
  name: 'rampway_provider_request_duration_seconds',
  help: 'Calls to fiat providers by provider, operation and outcome (the provider status, or error).',
  labelNames: ['provider', 'operation', 'outcome'] as const,
  buckets: SECONDS,
  registers: [registry],
});

export const providerErrors = new client.Counter({
  name: 'rampway_provider_errors_total',
  help: 'Provider calls that threw (unreachable, timed out, refused) by provider and operation.',
  labelNames: ['provider', 'operation'] as const,
  registers: [registry],
});

/** Provider callbacks a status query (or the request they name) contradicted: they changed nothing (CONTRACT §14). */
export const callbacksContradicted = new client.Counter({
  name: 'rampway_provider_callbacks_contradicted_total',
  help: 'Provider callbacks that changed nothing because the provider\'s status query or the request they name contradicted them, by provider and kind (collection, payout).',
  labelNames: ['provider', 'kind'] as const,
  registers: [registry],
});

export const scanLagBlocks = new client.Gauge({
  name: 'rampway_settlement_scan_lag_blocks',
  help: 'Blocks between a chain\'s head and the last block the settlement watcher scanned, per environment and chain, as of its last scan.',
  labelNames: ['environment', 'chain'] as const,
  registers: [registry],
});

export const chainDrift = new client.Gauge({
  name: 'rampway_ledger_chain_drift_usdc_minor',
  help: 'On-chain USDC minus what the ledger says the address holds, summed over the addresses of a kind (managed_wallet, treasury), in minor units, as of the last reconciliation; 0 when they agree.',
  labelNames: ['environment', 'chain', 'kind'] as const,
  registers: [registry],
});

export const chainDriftAddresses = new client.Gauge({
  name: 'rampway_ledger_chain_drifted_addresses',
  help: 'Addresses whose on-chain USDC differs from the ledger, per kind, as of the last reconciliation.',
  labelNames: ['environment', 'chain', 'kind'] as const,
  registers: [registry],
});

let queueSource: Queues | undefined;
const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed', 'prioritized'] as const;

/** Jobs per queue and state, read from Redis at scrape time (nothing per request or per job). */
new client.Gauge({
  name: 'rampway_queue_jobs',
  help: 'Jobs in each queue by state, read when scraped.',
  labelNames: ['queue', 'state'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    if (!queueSource) return;
    await Promise.all(Object.entries(queueSource).map(async ([name, queue]) => {
      try {
        const counts = await queue.getJobCounts(...QUEUE_STATES);
        for (const state of QUEUE_STATES) this.set({ queue: name, state }, counts[state] ?? 0);
      } catch {
        // Redis unreachable: the depth is unknown, not zero; the series are left out of this scrape.
      }
    }));
  },
});

/** The queues whose depth this process reports. */
export function reportQueueDepth(queues: Queues): void {
  queueSource = queues;
}

/** Times a call and records it; the outcome is named by `outcomeOf` (a provider's status), `error` when it throws. */
export async function timed<T>(record: (seconds: number, outcome: string) => void, fn: () => Promise<T>, outcomeOf: (value: T) => string): Promise<T> {
  const started = performance.now();
  try {
    const value = await fn();
    record((performance.now() - started) / 1000, outcomeOf(value));
    return value;
  } catch (err) {
    record((performance.now() - started) / 1000, 'error');
    throw err;
  }
}
