// Exchange rates: fiat units per 1 USDC (CONTRACT §1). Sandbox quotes price from a fixed, documented table so
// integrators can check our arithmetic by hand; live quotes read RATE_SOURCE_URL through the same interface.
import { randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import { AppError } from '../errors.js';
import { corridorError } from './corridors.js';
import type { Config } from '../config.js';
import type { JobRequest } from '../queues/producer.js';
import { jobId } from '../queues/registry.js';
import type { Environment } from './chains.js';
import { Decimal, formatRate } from './money.js';
import { planOnce } from '../db/prepared-client.js';

export interface RateQuote {
  /** Fiat units per 1 USDC, a decimal string with at most 8 fractional digits, trailing zeros trimmed. */
  rate: string;
  /** ISO 8601 UTC: when the source observed the rate (the pricing worker refuses stale ones). */
  as_of: string;
}

export interface RateSource {
  rate(currency: string): Promise<RateQuote>;
  /**
   * It answers without leaving the process (the sandbox's table), as a provider's `answersInUnit`: a quote can be read,
   * priced and moved in one unit. Absent where the rate comes over the network (asked outside any transaction).
   */
  readonly answersInUnit?: boolean;
}

/** Fiat units per 1 USDC in the sandbox. Plausible, fixed, and already in formatRate's canonical form. */
export const SANDBOX_RATES: Readonly<Record<string, string>> = Object.freeze({
  KES: '129.35',
  UGX: '3705.5',
  TZS: '2655.25',
  RWF: '1415.75',
  GHS: '15.45',
  NGN: '1545.8',
  ZAR: '18.1234',
  CAD: '1.3825',
  USD: '1',
  EUR: '0.92145678',
  GBP: '0.78912345',
});

export const sandboxRateSource: RateSource = {
  answersInUnit: true,
  async rate(currency: string): Promise<RateQuote> {
    const rate = SANDBOX_RATES[currency];
    if (rate === undefined) throw corridorError('unsupported_corridor', `There is no sandbox rate for ${currency}.`, { currency });
    // The table never ages: stamp it with the current second, so the freshness check that guards live rates passes
    // and the quotes priced within one second are one observation (stored once, not once per quote).
    return { rate, as_of: new Date(Math.floor(Date.now() / 1000) * 1000).toISOString() };
  },
};

/** The sandbox table as Markdown, for the README and anything else that documents it. */
export function sandboxRatesMarkdown(): string {
  const rows = Object.entries(SANDBOX_RATES).map(([currency, rate]) => `| ${currency} | ${rate} |`);
  return ['| currency | units per 1 USDC |', '|---|---:|', ...rows].join('\n');
}

/**
 * The live rate source: `GET <base>/rates?base=USDC&quote=<currency>` answering `{ base, quote, rate, as_of }`.
 * A network failure or a malformed answer is an outage (the pricing job retries), never a price.
 */
export function httpRateSource(baseUrl: string, timeoutMs = 3000): RateSource {
  return {
    async rate(currency: string): Promise<RateQuote> {
      const url = new URL('rates', baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`);
      url.searchParams.set('base', 'USDC');
      url.searchParams.set('quote', currency);
      const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: 'error' }).catch(() => null);
      const body = (res?.ok ? await res.json().catch(() => null) : null) as Partial<RateQuote & { base: string; quote: string }> | null;
      if (!body || body.base !== 'USDC' || body.quote !== currency || typeof body.rate !== 'string' || !/^(0|[1-9][0-9]*)(\.[0-9]{1,8})?$/.test(body.rate)
        || typeof body.as_of !== 'string' || Number.isNaN(Date.parse(body.as_of))) {
        throw AppError.unavailable(`The rate source gave no usable ${currency} rate.`);
      }
      return { rate: body.rate, as_of: new Date(body.as_of).toISOString() };
    },
  };
}

/** Sandbox prices from the table; live from RATE_SOURCE_URL (unset: live quotes cannot be priced). */
export function rateSourceFor(environment: 'sandbox' | 'live', rateSourceUrl: string | null): RateSource {
  if (environment === 'sandbox') return sandboxRateSource;
  if (!rateSourceUrl) throw AppError.unavailable('Live pricing is not configured on this deployment (RATE_SOURCE_URL).', 60);
  return httpRateSource(rateSourceUrl);
}

// The latest rate per currency the pricing pool observed, kept in PostgreSQL: a payment intent is priced from it at
// creation without the web process calling the rate source (the pricing pool refreshes it on demand).

type RateStore = Pick<DataSource | EntityManager, 'query'>;

/** Keeps the newer of the stored rate and this one. */
export async function storeRate(q: RateStore, environment: Environment, currency: string, quote: RateQuote): Promise<void> {
  await q.query(
    `INSERT INTO exchange_rates AS r (environment, currency, rate, as_of) VALUES ($1, $2, $3, $4)
     ON CONFLICT (environment, currency) DO UPDATE SET rate = EXCLUDED.rate, as_of = EXCLUDED.as_of WHERE r.as_of < EXCLUDED.as_of`,
    [environment, currency, quote.rate, quote.as_of],
  );
}

/** The stored rate if it is younger than `maxAgeSeconds`, else null. */
export async function storedFreshRate(q: RateStore, environment: Environment, currency: string, maxAgeSeconds: number): Promise<RateQuote | null> {
  const rows: { rate: string; as_of: Date }[] = await q.query(
    `SELECT rate::text, as_of FROM exchange_rates WHERE environment = $1 AND currency = $2 AND as_of > now() - make_interval(secs => $3)`,
    [environment, currency, maxAgeSeconds],
  );
  return rows[0] ? { rate: formatRate(new Decimal(rows[0].rate)), as_of: rows[0].as_of.toISOString() } : null;
}

/** The rate source answered, but with a rate too old to price with: a quote is refused at once, not retried. */
export class StaleRateError extends AppError {
  constructor(currency: string, maxAgeSeconds: number) {
    super('service_unavailable', `The rate source's ${currency} rate is older than ${maxAgeSeconds} s (RATE_MAX_AGE_SECONDS); live quotes are refused until it is fresh.`, { reason: 'rate_stale' }, 5);
    this.name = 'StaleRateError';
  }
}

/** Where live rates are cached briefly (Redis), so pricing does not call the source for every quote. */
export interface RateCache {
  get(key: string): Promise<string | null>;
  set(key: string, value: string, px: 'PX', ms: number): Promise<unknown>;
}

/** At most a few seconds, and never longer than half the allowed age. */
const rateCacheMs = (maxAgeSeconds: number) => Math.min(5_000, (maxAgeSeconds * 1000) / 2);
const isFresh = (quote: RateQuote, maxAgeSeconds: number) => Date.now() - Date.parse(quote.as_of) <= maxAgeSeconds * 1000;

/** What this process stored last, per environment and currency: the same observation again within a second is not written. */
const lastStored = new Map<string, { rate: string; asOf: string; at: number }>();
const RESTORE_AFTER_MS = 1_000;

/**
 * storeRate(), unless another transaction holds the row's lock right now (it is writing an observation of the same
 * moment): a pricing unit, which stores the rate it prices with, never waits for another's commit. Answers false when
 * it stepped aside for such a lock (nothing written), true otherwise (stored, or the stored rate is as new). The row's
 * first write (none yet) waits as storeRate's does, and keeps the newer observation.
 */
async function storeUnlessBusy(q: RateStore, environment: Environment, currency: string, quote: RateQuote): Promise<boolean> {
  const [row]: { busy: boolean }[] = await q.query(
    planOnce(`WITH locked AS (SELECT 1 FROM exchange_rates WHERE environment = $1 AND currency = $2 FOR UPDATE SKIP LOCKED),
     updated AS (UPDATE exchange_rates SET rate = $3, as_of = $4 WHERE environment = $1 AND currency = $2 AND as_of < $4 AND EXISTS (SELECT 1 FROM locked)),
     inserted AS (INSERT INTO exchange_rates AS r (environment, currency, rate, as_of) SELECT $1, $2, $3, $4
        WHERE NOT EXISTS (SELECT 1 FROM exchange_rates WHERE environment = $1 AND currency = $2)
        ON CONFLICT (environment, currency) DO UPDATE SET rate = EXCLUDED.rate, as_of = EXCLUDED.as_of WHERE r.as_of < EXCLUDED.as_of)
     SELECT NOT EXISTS (SELECT 1 FROM locked) AND EXISTS (SELECT 1 FROM exchange_rates WHERE environment = $1 AND currency = $2) AS busy`),
    [environment, currency, quote.rate, quote.as_of],
  );
  return !row!.busy;
}

/**
 * Stores the rate unless this process stored the very same observation (rate and as_of) within the last second (a
 * quote priced every few milliseconds would otherwise write the one row each time, its own transaction and commit). A
 * newer observation is written at once, even of the same rate: the web process reads the stored row's age.
 */
async function storeUnlessFresh(q: RateStore, environment: Environment, currency: string, quote: RateQuote): Promise<void> {
  const key = `${environment}:${currency}`;
  const last = lastStored.get(key);
  if (last && last.rate === quote.rate && last.asOf === quote.as_of && Date.now() - last.at < RESTORE_AFTER_MS) return;
  // Stepped aside for another writer: not noted as stored, so the next price tries again.
  if (!(await storeUnlessBusy(q, environment, currency, quote))) return;
  lastStored.set(key, { rate: quote.rate, asOf: quote.as_of, at: Date.now() });
}

/**
 * Workers: a rate straight from the source (or its brief cache), refused when stale, and stored for the web process.
 * A cached observation is used while at least half the allowed age is left, so the rate it stores stays fresh long
 * enough for the request waiting on it to read it. `storeAlways`: a refresh, whose whole purpose is the stored row,
 * writes it even when this process stored the same observation a moment ago (the row may have been written since).
 */
export async function freshRateFromSource(
  q: RateStore, config: Pick<Config, 'rateSourceUrl' | 'rateMaxAgeSeconds' | 'redisPrefix'>, environment: Environment, currency: string, cache?: RateCache,
  options: { storeAlways?: boolean } = {},
): Promise<RateQuote> {
  const store = options.storeAlways ? storeRate : storeUnlessFresh;
  const key = `${config.redisPrefix}:rate:${environment}:${currency}`;
  if (environment === 'live' && cache) {
    // A cache that is down costs a call to the source, never a price.
    const hit = await cache.get(key).catch(() => null);
    const cached = hit ? (JSON.parse(hit) as RateQuote) : null;
    if (cached && isFresh(cached, config.rateMaxAgeSeconds / 2)) {
      // The web process reads the stored row, not this cache: a refresh answered from the cache keeps that row fresh too.
      await store(q, environment, currency, cached);
      return cached;
    }
  }
  const quote = await rateSourceFor(environment, config.rateSourceUrl).rate(currency);
  if (!isFresh(quote, config.rateMaxAgeSeconds)) throw new StaleRateError(currency, config.rateMaxAgeSeconds);
  await store(q, environment, currency, quote);
  if (environment === 'live' && cache) await cache.set(key, JSON.stringify(quote), 'PX', rateCacheMs(config.rateMaxAgeSeconds)).catch(() => undefined);
  return quote;
}

/**
 * A refresh a request asks for: an id of its own, so a refresh that already ran (or failed) can never swallow it; the
 * web process shares one among its concurrent requests, and the pricing pool's brief cache spares the source.
 */
export function refreshRateJob(environment: Environment, currency: string): JobRequest<'rate.refresh'> {
  return { name: 'rate.refresh', id: jobId('rate.refresh', environment, currency, randomUUID()), data: { environment, currency } };
}

/**
 * How often the pricing pool refreshes each live currency's rate ahead of need: a quarter of RATE_MAX_AGE_SECONDS (at
 * most 15 s, at least 1 s), so the stored rate is never near its age limit when a request reads it.
 */
export function rateRefreshEveryMs(config: Pick<Config, 'rateMaxAgeSeconds'>): number {
  return Math.max(1_000, Math.min(15_000, Math.floor((config.rateMaxAgeSeconds * 1000) / 4)));
}
