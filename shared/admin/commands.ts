import type { DataSource } from 'typeorm';
import type { Redis } from 'ioredis';
import { ENVIRONMENTS, type Environment } from '../domain/chains.js';
import { MAX_ALLOWED_IPS, SCOPES, generateApiKey, isScope, normalizeIp, type Scope } from '../domain/api-keys.js';
import type { Config } from '../config.js';
import { feeColumns, feeFromRow, platformBpsProblem, platformMinProblem, updatePlatformFee, type FeeRow } from '../domain/fees.js';
import { accountXpub, MANAGED_WALLET_BASE_PATH, TREASURY_PATH, treasuryAddress } from '../chain/hd-wallet.js';

export class AdminError extends Error {}

export interface CreatedKey {
  id: string;
  environment: Environment;
  key: string;
  scopes: Scope[];
  allowed_ips: string[];
}

export interface AdminDeps {
  ds: DataSource;
  config: Config;
  /** Optional: when given, web processes are told to drop their key caches. */
  redis?: Redis;
}

// The columns are 32-bit integers; a window longer than a day is no rate limit anyone expects.
const MAX_RATE_LIMIT = 2_147_483_647;
const MAX_RATE_WINDOW_SECONDS = 86_400;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const isEnvironment = (value: string): value is Environment => (ENVIRONMENTS as readonly string[]).includes(value);

/** Scopes as an operator writes them (README): a scope, every scope of a resource (`customers:*`), or all (`*`). */
export function expandScopes(requested: string[]): Scope[] {
  const scopes = new Set<Scope>();
  for (const scope of requested) {
    const matched = scope === '*' ? SCOPES
      : scope.endsWith(':*') ? SCOPES.filter((known) => known.startsWith(scope.slice(0, -1)))
      : isScope(scope) ? [scope] : [];
    if (matched.length === 0) throw new AdminError(`unknown scope "${scope}"; known: ${SCOPES.join(', ')} (resource:* for all of a resource's, * for all)`);
    for (const known of matched) scopes.add(known);
  }
  return [...scopes];
}

async function announceKeyChange(deps: AdminDeps): Promise<void> {
  if (!deps.redis) return;
  await deps.redis.publish(`${deps.config.redisPrefix}:api-keys:changed`, 'changed').catch(() => undefined);
}

export async function createKey(
  deps: AdminDeps,
  opts: { businessId: string; environment: string; scopes?: string[]; allowedIps?: string[]; rateLimit?: number; rateWindowSeconds?: number },
): Promise<CreatedKey> {
  if (!UUID.test(opts.businessId)) throw new AdminError('--business must be a business id (UUID)');
  if (!isEnvironment(opts.environment)) throw new AdminError('--environment must be sandbox or live');
  const scopes = opts.scopes === undefined ? [...SCOPES] : expandScopes(opts.scopes);
  const ips = (opts.allowedIps ?? []).map((raw) => {
    const ip = normalizeIp(raw);
    if (!ip) throw new AdminError(`"${raw}" is not an IPv4 or IPv6 address`);
    return ip;
  });
  if (ips.length > MAX_ALLOWED_IPS) throw new AdminError(`at most ${MAX_ALLOWED_IPS} allowed IPs per key`);
  const rateLimit = opts.rateLimit ?? deps.config.defaultRateLimit;
  const window = opts.rateWindowSeconds ?? deps.config.defaultRateWindowSeconds;
  if (!Number.isInteger(rateLimit) || rateLimit < 1 || rateLimit > MAX_RATE_LIMIT) throw new AdminError(`--rate-limit must be an integer from 1 to ${MAX_RATE_LIMIT}`);
  if (!Number.isInteger(window) || window < 1 || window > MAX_RATE_WINDOW_SECONDS) throw new AdminError(`--rate-window must be an integer from 1 to ${MAX_RATE_WINDOW_SECONDS} (seconds)`);
  const exists: unknown[] = await deps.ds.query(`SELECT 1 FROM businesses WHERE id = $1`, [opts.businessId]);
  if (exists.length === 0) throw new AdminError(`no business ${opts.businessId}`);
  const environment = opts.environment as Environment;
  const generated = generateApiKey(environment);
  const rows: { id: string }[] = await deps.ds.query(
    `INSERT INTO api_keys (business_id, environment, prefix, key_hash, scopes, allowed_ips, rate_limit, rate_window_seconds)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
    [opts.businessId, environment, generated.prefix, generated.hash, scopes, [...new Set(ips)], rateLimit, window],
  );
  return { id: rows[0].id, environment, key: generated.key, scopes, allowed_ips: [...new Set(ips)] };
}

export async function createBusiness(deps: AdminDeps, opts: { name: string }): Promise<{ business_id: string; name: string; keys: CreatedKey[] }> {
  const name = opts.name?.trim();
  if (!name || name.length > 200) throw new AdminError('--name must be 1 to 200 characters');
  const rows: { id: string }[] = await deps.ds.query(`INSERT INTO businesses (name) VALUES ($1) RETURNING id`, [name]);
  const businessId = rows[0].id;
  const keys = [];
  for (const environment of ENVIRONMENTS) keys.push(await createKey(deps, { businessId, environment }));
  return { business_id: businessId, name, keys };
}

export async function revokeKey(deps: AdminDeps, opts: { keyId: string }): Promise<{ id: string; revoked_at: string }> {
  if (!UUID.test(opts.keyId)) throw new AdminError('--key must be an API key id (UUID)');
  // TypeORM answers an UPDATE with [rows, affected].
  const [rows]: [{ id: string; revoked_at: Date }[], number] = await deps.ds.query(
    `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 RETURNING id, revoked_at`,
    [opts.keyId],
  );
  if (rows.length === 0) throw new AdminError(`no API key ${opts.keyId}`);
  await announceKeyChange(deps);
  return { id: rows[0].id, revoked_at: rows[0].revoked_at.toISOString() };
}

export async function enableLive(deps: AdminDeps, opts: { businessId: string }): Promise<{ business_id: string; live_enabled: true }> {
  if (!UUID.test(opts.businessId)) throw new AdminError('--business must be a business id (UUID)');
  const [rows]: [unknown[], number] = await deps.ds.query(`UPDATE businesses SET live_enabled = true, updated_at = now() WHERE id = $1 RETURNING id`, [opts.businessId]);
  if (rows.length === 0) throw new AdminError(`no business ${opts.businessId}`);
  await announceKeyChange(deps);
  return { business_id: opts.businessId, live_enabled: true };
}

export interface BusinessFees {
  business_id: string;
  platform_bps: number;
  /** USDC at exactly 6 decimals. */
  platform_min: string;
}

/** The platform fee of one business: `bps` of each quote's source amount, at least `min` USDC (unchanged when omitted). */
export async function setFees(deps: AdminDeps, opts: { businessId: string; platformBps: string | number | undefined; platformMin?: string }): Promise<BusinessFees> {
  if (!UUID.test(opts.businessId)) throw new AdminError('--business must be a business id (UUID)');
  if (opts.platformBps === undefined) throw new AdminError('--platform-bps is required (basis points, 50 = 0.5 %)');
  const bpsProblem = platformBpsProblem(opts.platformBps);
  if (bpsProblem) throw new AdminError(`--platform-bps ${bpsProblem}`);
  const minProblem = opts.platformMin === undefined ? null : platformMinProblem(opts.platformMin);
  if (minProblem) throw new AdminError(`--platform-min ${minProblem}`);
  const fee = await updatePlatformFee(deps.ds, opts.businessId, Number(opts.platformBps), opts.platformMin);
  if (!fee) throw new AdminError(`no business ${opts.businessId}`);
  await announceKeyChange(deps);
  return { business_id: opts.businessId, platform_bps: fee.bps, platform_min: fee.min };
}

export interface BusinessSummary {
  id: string;
  name: string;
  status: string;
  live_enabled: boolean;
  platform_bps: number;
  platform_min: string;
  created_at: string;
}

export async function listBusinesses(deps: AdminDeps): Promise<BusinessSummary[]> {
  const rows: (FeeRow & { id: string; name: string; status: string; live_enabled: boolean; created_at: Date })[] = await deps.ds.query(
    `SELECT b.id, b.name, b.status, b.live_enabled, b.created_at, ${feeColumns('b')} FROM businesses b ORDER BY b.created_at, b.id`,
  );
  return rows.map((r) => {
    const fee = feeFromRow(r);
    return { id: r.id, name: r.name, status: r.status, live_enabled: r.live_enabled, platform_bps: fee.bps, platform_min: fee.min, created_at: r.created_at.toISOString() };
  });
}

/** A key as an operator may see it: never the key itself, nor its hash. */
export interface KeySummary {
  id: string;
  environment: Environment;
  prefix: string;
  scopes: string[];
  allowed_ips: string[];
  rate_limit: { limit: number; window_seconds: number };
  revoked: boolean;
  revoked_at: string | null;
  created_at: string;
}

export async function listKeys(deps: AdminDeps, opts: { businessId: string }): Promise<KeySummary[]> {
  if (!UUID.test(opts.businessId)) throw new AdminError('--business must be a business id (UUID)');
  const exists: unknown[] = await deps.ds.query(`SELECT 1 FROM businesses WHERE id = $1`, [opts.businessId]);
  if (exists.length === 0) throw new AdminError(`no business ${opts.businessId}`);
  const rows: { id: string; environment: Environment; prefix: string; scopes: string[]; allowed_ips: string[]; rate_limit: number; rate_window_seconds: number; revoked_at: Date | null; created_at: Date }[] =
    await deps.ds.query(
      `SELECT id, environment, prefix, scopes, allowed_ips, rate_limit, rate_window_seconds, revoked_at, created_at
         FROM api_keys WHERE business_id = $1 ORDER BY created_at, id`,
      [opts.businessId],
    );
  return rows.map((r) => ({
    id: r.id, environment: r.environment, prefix: r.prefix, scopes: r.scopes, allowed_ips: r.allowed_ips,
    rate_limit: { limit: r.rate_limit, window_seconds: r.rate_window_seconds },
    revoked: r.revoked_at !== null, revoked_at: r.revoked_at?.toISOString() ?? null, created_at: r.created_at.toISOString(),
  }));
}

/** The seed of --environment; the commands that use one are run with holdWalletSeeds(). */
function seedOf(config: Config, environment: string): { environment: Environment; seed: string } {
  if (!isEnvironment(environment)) throw new AdminError('--environment must be sandbox or live');
  const seed = config.walletSeeds?.[environment];
  if (!seed) throw new AdminError('WALLET_SEED_LIVE is not set, so live has no wallet keys yet: set it to its own BIP-39 mnemonic');
  return { environment, seed };
}

/** The environment's treasury hot wallet, derived from its seed (no database needed). */
export function treasuryWallet(config: Config, opts: { environment: string }): { environment: Environment; address: `0x${string}`; path: string } {
  const { environment, seed } = seedOf(config, opts.environment);
  return { environment, address: treasuryAddress(seed), path: TREASURY_PATH };
}

/** The account node's extended public key (WALLET_XPUB / WALLET_XPUB_LIVE for processes that hold no seed). */
export function walletXpub(config: Config, opts: { environment: string }): { environment: Environment; xpub: string; path: string } {
  const { environment, seed } = seedOf(config, opts.environment);
  return { environment, xpub: accountXpub(seed), path: MANAGED_WALLET_BASE_PATH };
}
