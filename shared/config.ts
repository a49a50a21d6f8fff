// The only reader of process.env. Validated once, on first use.
import { hkdfSync } from 'node:crypto';
import { isIP } from 'node:net';
import { CHAINS, type Chain } from './domain/chains.js';
import { ConfigError } from './config-error.js';
import { checksumAddress } from './chain/address.js';
import { allowedIps, blockNumber, checkDaraja, darajaBaseUrl, liveChainOverride } from './config-live-rails.js';
import { checkMomo, momoSettings, type MomoSettings } from './config-momo.js';
import { walletSettings, type WalletSettings } from './config-wallets.js';
import { needsOf, requireSettings, type SettingName } from './config-processes.js';
import { databaseConfig, type DatabaseSettings } from './config-database.js';
import { DEV_ENCRYPTION_KEY, DEV_ENCRYPTION_KEYS, parseEncryptionKeys } from './config-encryption.js';

export { databaseSettings } from './config-database.js';
export { DEV_ENCRYPTION_KEY, parseEncryptionKeys } from './config-encryption.js';

export interface Config extends DatabaseSettings {
  nodeEnv: string;
  port: number;
  /** Where integrators reach the API; named in wallet-ownership messages. */
  publicBaseUrl: string;
  redisUrl: string;
  redisPrefix: string;
  redisTlsRejectUnauthorized: boolean;
  /** The web process's Redis commands give up after this long: a stalled Redis counts as a Redis that is down. */
  redisCommandTimeoutMs: number;
  logLevel: string;
  trustProxy: boolean | number | string;
  sandboxStepMs: number;
  quoteTtlSeconds: number;
  /** How long POST /quotes waits for the pricing pool before answering 202 pending. */
  quoteWaitMs: number;
  /** A live rate older than this is not used. */
  rateMaxAgeSeconds: number;
  /** CSV exports one API key may run at once (CONTRACT 18); one more answers 429. */
  exportsPerKey: number;
  /** An export whose reader takes nothing for this long is ended and its slot freed. */
  exportStallMs: number;
  /** How long an off-ramp settlement waits for its transfer. */
  settlementTtlSeconds: number;
  /** How long an off-ramp waits in action_required on `underpaid` or `late_deposit` before what it holds goes back. */
  autoRefundAfterSeconds: number;
  /** How often the settlement pool scans each chain with open deposit addresses, and the widest block range it asks for. */
  settlementPollMs: number;
  settlementMaxBlockRange: number;
  /** How many of the newest blocks each scan reads again (a lagging node's answer may lack their logs). */
  settlementRescanBlocks: number;
  /** Provider calls (collections, payouts): attempts in all, and the first backoff delay (exponential). */
  providerMaxAttempts: number;
  providerRetryBaseMs: number;
  /** How long the watcher keeps scanning a chain for deposit addresses that closed (late deposits, overpayments). */
  lateDepositWatchSeconds: number;
  /** How long a transaction step may sit unchanged before the sweeper counts its job as lost and enqueues it again. */
  sweeperStaleSeconds: number;
  /** How long a worker holds a job's lock; a job whose worker died is handed to another after about this long. */
  workerLockMs: number;
  /**
   * How often, over its life, a job may be cut off by its worker dying before it is failed for good (its final-failure
   * handler then records the outcome; the sweeper's retry of such a job starts the count again). Every job is
   * idempotent, so a killed worker's job runs again; only a job that keeps killing its worker (it exhausts memory,
   * say) is stopped.
   */
  workerMaxStalls: number;
  /** key id -> 32-byte master key; the first listed is the one new data is encrypted under */
  encryptionKeys: { id: string; key: Buffer }[];
  /** Per environment, the xpub every deposit and managed-wallet address comes from, and the treasury hot wallet's address. */
  wallets: WalletSettings['wallets'];
  /**
   * The BIP-39 seeds, only in a process that signs (the settlement pool, admin commands that need them): null in every
   * other process, which never reads WALLET_SEED or WALLET_SEED_LIVE.
   */
  walletSeeds: WalletSettings['walletSeeds'];
  /**
   * False while the encrypting (first) key of ENCRYPTION_KEYS is the built-in development key, whatever id it is listed
   * under: its bytes are in this file, so live beneficiary details are then refused (503), never sealed under it.
   */
  encryptionKeysConfigured: boolean;
  /**
   * Per chain: its RPC, USDC contract and confirmation depth; and the native gas a managed wallet or deposit address
   * must hold before it sends USDC (below `gasTopupMinWei` the treasury hot wallet tops it up to `gasTopupTargetWei`;
   * a target of 0 turns top-ups off); `startBlock` (SETTLEMENT_START_BLOCK_<CHAIN>): where the live watcher's first scan
   * of the chain starts (null: the block at which the oldest open deposit address was issued).
   */
  chains: Record<Chain, { rpcUrl: string | null; usdcAddress: string; confirmations: number; gasTopupMinWei: bigint; gasTopupTargetWei: bigint; startBlock: bigint | null }>;
  /** How often the settlement pool compares each live managed and treasury address's on-chain USDC with the ledger. */
  chainReconcileMs: number;
  /** Addresses a worker keeps derived ahead of need per environment (0: none; every create then derives its own). */
  addressPoolSize: number;
  adminUser: string | null;
  adminPassword: string | null;
  /** Each worker process serves its Prometheus metrics on this port (0: off); behind ADMIN_USER / ADMIN_PASSWORD. */
  workerMetricsPort: number;
  apiKeyCacheTtlMs: number;
  authFailLimit: number;
  authFailWindowSeconds: number;
  defaultRateLimit: number;
  defaultRateWindowSeconds: number;
  /** How long PostgreSQL keeps an idempotency record (the purge job deletes older ones). */
  idempotencyTtlSeconds: number;
  /** How long Redis caches a finished idempotency record (the fast path of a replay). */
  idempotencyCacheSeconds: number;
  /** Keys the request fingerprints kept in Redis, so a stored hash cannot be brute-forced back into a body. */
  idempotencySecret: Buffer;
  idempotencyLockMs: number;
  outboxGraceMs: number;
  outboxPollMs: number;
  shutdownTimeoutMs: number;
  webhooks: {
    /** Sandbox endpoints may use http and loopback addresses (local development, the tests). Never in live. */
    allowLoopback: boolean;
    /** One attempt's whole exchange. */
    timeoutMs: number;
    /** The delays before each retry (ms); after the last one the message has failed and the endpoint is failing. */
    retryScheduleMs: number[];
    /** Deliveries in flight to one endpoint at once, across every webhooks worker: a slow endpoint keeps only these. */
    endpointConcurrency: number;
    /** Deliveries in flight for one business at once, across its endpoints (CONTRACT 18, fairness). */
    businessConcurrency: number;
  };
  /** PUBLIC_BASE_URL was set: the localhost fallback is no address a provider can call back. */
  publicBaseUrlConfigured: boolean;
  /**
   * M-Pesa Daraja (KES mobile money). Every field is optional: a rail that is not configured is simply not ready,
   * and GET /onramps/readiness says which part is missing.
   */
  daraja: {
    consumerKey: string | null;
    consumerSecret: string | null;
    shortcode: string | null;
    passkey: string | null;
    /** Secret path segment of every callback URL handed to Daraja. */
    callbackToken: string | null;
    /** Safaricom's API root (default: its sandbox). */
    baseUrl: string;
    /** B2C, B2B and Transaction Status: the paying shortcode and the initiator's name and encrypted credential. */
    b2cShortcode: string | null;
    initiatorName: string | null;
    securityCredential: string | null;
    /** Callbacks from other addresses are refused; empty: any address (the path token still authenticates). */
    callbackAllowedIps: string[];
    /** How long a request waits for its callback before Transaction Status / STK Query is asked. */
    statusQueryAfterMs: number;
    /** Each call to Daraja (token, request, query) is abandoned after this long: a temporary failure. */
    requestTimeoutMs: number;
  };
  /** MTN MoMo Open API (CONTRACT §17): null credentials and no currencies when the rail is not configured. */
  momo: MomoSettings;
  /**
   * Tests only: live on-ramps and off-ramps run on the sandbox chain adapter (the live chain adapter is another
   * issue). Refused in production.
   */
  liveChainOverride: 'sandbox' | null;
  /** Live rates (GET <url>/rates?base=USDC&quote=KES); unset: live quotes cannot be priced. */
  rateSourceUrl: string | null;
}

export { ConfigError };

const CANONICAL_USDC: Record<Chain, string> = {
  base: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  polygon: '0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359',
  arbitrum: '0xaf88d065e77c8cC2239327C5EDb3A432268e5831',
  optimism: '0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85',
  avalanche: '0xB97EF9Ef8734C71904D8002F8b6Bc66Dd9c48a6E',
};

// Circle's published confirmation guidance.
const DEFAULT_CONFIRMATIONS: Record<Chain, number> = { base: 12, arbitrum: 12, optimism: 12, polygon: 3, avalanche: 1 };

// Native gas a sender must hold (wei): about a hundred USDC transfers' worth on each chain at ordinary fees.
const GAS_TOPUP_DEFAULTS: Record<Chain, { min: bigint; target: bigint }> = {
  base: { min: 20_000_000_000_000n, target: 100_000_000_000_000n },
  arbitrum: { min: 20_000_000_000_000n, target: 100_000_000_000_000n },
  optimism: { min: 20_000_000_000_000n, target: 100_000_000_000_000n },
  polygon: { min: 50_000_000_000_000_000n, target: 250_000_000_000_000_000n },
  avalanche: { min: 5_000_000_000_000_000n, target: 25_000_000_000_000_000n },
};

function wei(env: NodeJS.ProcessEnv, name: string, fallback: bigint): bigint {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d{1,40}$/.test(raw)) throw new ConfigError(`${name} must be a whole number of wei`);
  return BigInt(raw);
}


function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 0): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min) throw new ConfigError(`${name} must be an integer >= ${min}`);
  return Number(raw);
}

/**
 * Exponential, about 3 days in all: 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, 8 h, then every 12 h five times
 * (each delay is jittered by up to a fifth when used). WEBHOOK_RETRY_SCHEDULE_MS replaces it (comma-separated ms).
 */
const WEBHOOK_RETRY_SCHEDULE_MS = [5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000, 28_800_000, ...Array(5).fill(43_200_000)];

function retrySchedule(raw: string | undefined): number[] {
  if (raw === undefined || raw === '') return WEBHOOK_RETRY_SCHEDULE_MS;
  const parts = raw.split(',').map((p) => p.trim());
  if (!parts.every((p) => /^\d{1,10}$/.test(p))) throw new ConfigError('WEBHOOK_RETRY_SCHEDULE_MS must be comma-separated whole milliseconds, e.g. 100,200,400');
  return parts.map(Number);
}

const PROXY_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** A proxy address, a subnet (address/prefix) or one of Express's named ranges. */
function proxyEntry(entry: string): boolean {
  if (PROXY_RANGES.has(entry)) return true;
  const [address, prefix, ...rest] = entry.split('/');
  const kind = isIP(address);
  if (!kind || rest.length) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (kind === 4 ? 32 : 128));
}

/** false, true, a hop count, or proxy addresses and subnets: anything else stops the boot, not Express at its first request. */
function parseTrustProxy(raw: string | undefined): boolean | number | string {
  const value = raw?.trim().toLowerCase() ?? '';
  if (!value || value === 'false' || value === '0') return false;
  if (value === 'true') return true;
  if (/^\d+$/.test(value)) return Number(value);
  const entries = value.split(',').map((e) => e.trim());
  if (entries.every(proxyEntry)) return entries.join(',');
  throw new ConfigError('TRUST_PROXY is true, false, a hop count (1 behind Heroku\'s router), or proxy addresses/subnets (e.g. 10.0.0.0/8,loopback)');
}

function publicBaseUrl(raw: string | undefined, port: number): string {
  const value = raw || `http://localhost:${port}`;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError('PUBLIC_BASE_URL must be an absolute URL, e.g. https://api.example.com');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new ConfigError('PUBLIC_BASE_URL must be http(s)');
  return url.origin;
}

/** A token address override, checksummed (responses show it as EIP-55); a malformed one stops the boot. */
function usdcAddress(name: string, raw: string | undefined): string | null {
  if (!raw) return null;
  const checked = checksumAddress(raw.trim());
  if ('problem' in checked) throw new ConfigError(`${name} is not a valid EVM address (${checked.problem.replace(/_/g, ' ')})`);
  return checked.address;
}

/**
 * `walletSeeds`: this process signs, so it reads WALLET_SEED / WALLET_SEED_LIVE (and checks any WALLET_XPUB given beside
 * them). Without it, as in the web process, the seeds are never read: addresses come from WALLET_XPUB / WALLET_XPUB_LIVE.
 * `needs`: what production requires of this process (shared/config-processes.ts); by default the web process's, or
 * the settlement pool's with `walletSeeds`. `who` names the process in the error.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, opts: { walletSeeds?: boolean; needs?: readonly SettingName[]; who?: string } = {}): Config {
  const nodeEnv = env.NODE_ENV ?? 'development';
  // First of the production checks: whatever else is missing, this switch must never reach a running service.
  if (nodeEnv === 'production' && env.WEBHOOKS_ALLOW_LOOPBACK === 'true') {
    throw new ConfigError('WEBHOOKS_ALLOW_LOOPBACK=true is for local development and tests; NODE_ENV=production refuses it (unset it)');
  }
  // Then everything this process needs and nothing else, all named at once: the release phase, DATABASE_URL alone.
  if (nodeEnv === 'production') {
    const needs = opts.needs ?? needsOf([opts.walletSeeds ? 'settlement' : 'web']);
    requireSettings(env, needs, opts.who ?? (opts.walletSeeds ? 'a process that signs' : 'a process that does not sign'));
  }
  const db = databaseConfig(env);
  const chains = {} as Config['chains'];
  for (const chain of CHAINS) {
    const upper = chain.toUpperCase();
    chains[chain] = {
      rpcUrl: env[`RPC_URL_${upper}`] || null,
      usdcAddress: usdcAddress(`USDC_ADDRESS_${upper}`, env[`USDC_ADDRESS_${upper}`]) ?? CANONICAL_USDC[chain],
      confirmations: int(env, `CONFIRMATIONS_${upper}`, DEFAULT_CONFIRMATIONS[chain], 1),
      gasTopupMinWei: wei(env, `GAS_TOPUP_MIN_WEI_${upper}`, GAS_TOPUP_DEFAULTS[chain].min),
      gasTopupTargetWei: wei(env, `GAS_TOPUP_TARGET_WEI_${upper}`, GAS_TOPUP_DEFAULTS[chain].target),
      startBlock: blockNumber(`SETTLEMENT_START_BLOCK_${upper}`, env[`SETTLEMENT_START_BLOCK_${upper}`]),
    };
    if (chains[chain].gasTopupTargetWei !== 0n && chains[chain].gasTopupTargetWei < chains[chain].gasTopupMinWei) {
      throw new ConfigError(`GAS_TOPUP_TARGET_WEI_${upper} must be 0 (top-ups off) or at least GAS_TOPUP_MIN_WEI_${upper}`);
    }
  }
  const encryptionKeys = parseEncryptionKeys(env.ENCRYPTION_KEYS || DEV_ENCRYPTION_KEYS);
  const encryptionKeysConfigured = !encryptionKeys[0].key.equals(DEV_ENCRYPTION_KEY);
  const production = nodeEnv === 'production';
  checkDaraja(env);
  checkMomo(env);
  const wallets = walletSettings(env, { walletSeeds: opts.walletSeeds ?? false });
  return {
    nodeEnv,
    port: int(env, 'PORT', 3000),
    publicBaseUrl: publicBaseUrl(env.PUBLIC_BASE_URL, int(env, 'PORT', 3000)),
    ...db,
    redisUrl: env.REDIS_URL || 'redis://127.0.0.1:6379',
    redisPrefix: env.REDIS_PREFIX || 'rampway',
    redisTlsRejectUnauthorized: env.REDIS_TLS_REJECT_UNAUTHORIZED !== 'false',
    redisCommandTimeoutMs: int(env, 'REDIS_COMMAND_TIMEOUT_MS', 1000, 50),
    logLevel: env.LOG_LEVEL || 'info',
    trustProxy: parseTrustProxy(env.TRUST_PROXY),
    sandboxStepMs: int(env, 'SANDBOX_STEP_MS', 1000),
    quoteTtlSeconds: int(env, 'QUOTE_TTL_SECONDS', 120, 1),
    quoteWaitMs: int(env, 'QUOTE_WAIT_MS', 2000, 0),
    rateMaxAgeSeconds: int(env, 'RATE_MAX_AGE_SECONDS', 60, 1),
    exportsPerKey: int(env, 'EXPORTS_PER_KEY', 2, 1),
    exportStallMs: int(env, 'EXPORT_STALL_MS', 30_000, 100),
    settlementTtlSeconds: int(env, 'SETTLEMENT_TTL_SECONDS', 1800, 10),
    autoRefundAfterSeconds: int(env, 'AUTO_REFUND_AFTER_SECONDS', 900, 1),
    settlementPollMs: int(env, 'SETTLEMENT_POLL_MS', 2000, 100),
    settlementMaxBlockRange: int(env, 'SETTLEMENT_MAX_BLOCK_RANGE', 2000, 1),
    settlementRescanBlocks: int(env, 'SETTLEMENT_RESCAN_BLOCKS', 5, 0),
    chainReconcileMs: int(env, 'CHAIN_RECONCILE_MS', 300_000, 1000),
    addressPoolSize: int(env, 'ADDRESS_POOL_SIZE', 2000),
    sweeperStaleSeconds: int(env, 'SWEEPER_STALE_SECONDS', 60, 1),
    lateDepositWatchSeconds: int(env, 'LATE_DEPOSIT_WATCH_SECONDS', 604_800, 0),
    providerMaxAttempts: int(env, 'PROVIDER_MAX_ATTEMPTS', 4, 1),
    providerRetryBaseMs: int(env, 'PROVIDER_RETRY_BASE_MS', 2000, 1),
    workerLockMs: int(env, 'WORKER_LOCK_MS', 30_000, 1000),
    workerMaxStalls: int(env, 'WORKER_MAX_STALLS', 5, 1),
    encryptionKeys,
    ...wallets,
    encryptionKeysConfigured,
    chains,
    adminUser: env.ADMIN_USER || null,
    adminPassword: env.ADMIN_PASSWORD || null,
    workerMetricsPort: int(env, 'WORKER_METRICS_PORT', 0, 0),
    apiKeyCacheTtlMs: int(env, 'API_KEY_CACHE_TTL_MS', 10_000),
    authFailLimit: int(env, 'AUTH_FAIL_LIMIT', 30, 1),
    authFailWindowSeconds: int(env, 'AUTH_FAIL_WINDOW_SECONDS', 60, 1),
    defaultRateLimit: int(env, 'RATE_LIMIT_DEFAULT', 1000, 1),
    defaultRateWindowSeconds: int(env, 'RATE_LIMIT_WINDOW_SECONDS', 60, 1),
    idempotencyTtlSeconds: int(env, 'IDEMPOTENCY_TTL_SECONDS', 86_400, 1),
    idempotencyCacheSeconds: int(env, 'IDEMPOTENCY_CACHE_SECONDS', 600, 1),
    idempotencySecret: env.IDEMPOTENCY_SECRET
      ? Buffer.from(env.IDEMPOTENCY_SECRET, 'utf8')
      : Buffer.from(hkdfSync('sha256', encryptionKeys[0].key, Buffer.alloc(0), 'rampway idempotency fingerprint', 32)),
    idempotencyLockMs: int(env, 'IDEMPOTENCY_LOCK_MS', 60_000, 100),
    outboxGraceMs: int(env, 'OUTBOX_GRACE_MS', 5_000),
    outboxPollMs: int(env, 'OUTBOX_POLL_MS', 1_000, 10),
    shutdownTimeoutMs: int(env, 'SHUTDOWN_TIMEOUT_MS', 25_000, 100),
    publicBaseUrlConfigured: Boolean(env.PUBLIC_BASE_URL),
    daraja: {
      consumerKey: env.DARAJA_CONSUMER_KEY || null,
      consumerSecret: env.DARAJA_CONSUMER_SECRET || null,
      shortcode: env.DARAJA_SHORTCODE || null,
      passkey: env.DARAJA_PASSKEY || null,
      callbackToken: env.DARAJA_CALLBACK_TOKEN || null,
      baseUrl: darajaBaseUrl(env.DARAJA_BASE_URL),
      b2cShortcode: env.DARAJA_B2C_SHORTCODE || null,
      initiatorName: env.DARAJA_INITIATOR_NAME || null,
      securityCredential: env.DARAJA_SECURITY_CREDENTIAL || null,
      callbackAllowedIps: allowedIps(env.DARAJA_CALLBACK_ALLOWED_IPS),
      statusQueryAfterMs: int(env, 'DARAJA_STATUS_QUERY_AFTER_MS', 60_000, 10),
      requestTimeoutMs: int(env, 'DARAJA_REQUEST_TIMEOUT_MS', 10_000, 100),
    },
    momo: momoSettings(env, (name, fallback, min) => int(env, name, fallback, min)),
    liveChainOverride: liveChainOverride(env.RAMPWAY_TEST_LIVE_CHAIN, production),
    rateSourceUrl: env.RATE_SOURCE_URL || null,
    webhooks: {
      allowLoopback: env.WEBHOOKS_ALLOW_LOOPBACK === 'true',
      timeoutMs: int(env, 'WEBHOOK_TIMEOUT_MS', 15_000, 100),
      retryScheduleMs: retrySchedule(env.WEBHOOK_RETRY_SCHEDULE_MS),
      endpointConcurrency: int(env, 'WEBHOOK_ENDPOINT_CONCURRENCY', 16, 1),
      businessConcurrency: int(env, 'WEBHOOK_BUSINESS_CONCURRENCY', 32, 1),
    },
  };
}

let cached: Config | null = null;
let seedsHeld = false;
let declared: { needs: readonly SettingName[]; who: string } | null = null;

export function getConfig(): Config {
  cached ??= loadConfig(process.env, { walletSeeds: seedsHeld, ...declared });
  return cached;
}

/**
 * Called at boot by each entry point (web, the worker pools, migrate, each admin command, npm start), before it reads
 * its configuration: production then requires of it what `needs` names, and nothing else.
 */
export function configureFor(needs: readonly SettingName[], who: string): void {
  declared = { needs, who };
  cached = null;
}

/**
 * Called at boot by the processes that sign (the settlement pool, the admin commands that print keys), before they
 * read their configuration: only they read WALLET_SEED / WALLET_SEED_LIVE. No other process calls it.
 */
export function holdWalletSeeds(): void {
  seedsHeld = true;
  cached = null;
}

/** Tests change the environment between suites; this forgets the cached copy. */
export function resetConfig(): void {
  cached = null;
}
