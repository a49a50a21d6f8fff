import type { DataSource } from 'typeorm';
import type { Redis } from 'ioredis';
import { ENVIRONMENTS, type Environment } from '../domain/chains.js';
import { MAX_ALLOWED_IPS, SCOPES, generateApiKey, isScope, normalizeIp, type Scope } from '../domain/api-keys.js';
import type { Config } from '../config.js';
import { platformBpsProblem, platformMinProblem, updatePlatformFee } from '../domain/fees.js';

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

async function announceKeyChange(deps: AdminDeps): Promise<void> {
  if (!deps.redis) return;
  await deps.redis.publish(`${deps.config.redisPrefix}:api-keys:changed`, 'changed').catch(() => undefined);
}

export async function createKey(
  deps: AdminDeps,
  opts: { businessId: string; environment: string; scopes?: string[]; allowedIps?: string[]; rateLimit?: number; rateWindowSeconds?: number },
): Promise<CreatedKey> {
  if (!UUID.test(opts.businessId)) throw new AdminError('--business must be a business id (UUID)');
  if (!(ENVIRONMENTS as readonly string[]).includes(opts.environment)) throw new AdminError('--environment must be sandbox or live');
  const scopes = opts.scopes ?? [...SCOPES];
  const badScope = scopes.find((s) => !isScope(s));
  if (badScope) throw new AdminError(`unknown scope "${badScope}"; known: ${SCOPES.join(', ')}`);
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
    [opts.businessId, environment, generated.prefix, generated.hash, [...new Set(scopes)], [...new Set(ips)], rateLimit, window],
  );
  return { id: rows[0].id, environment, key: generated.key, scopes: [...new Set(scopes)] as Scope[], allowed_ips: [...new Set(ips)] };
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
