import type { DataSource } from 'typeorm';
import type { AuthContext } from '../context.js';
import type { Scope } from '../../shared/domain/api-keys.js';
import type { Environment } from '../../shared/domain/chains.js';
import { feeColumns, feeFromRow, type FeeRow } from '../../shared/domain/fees.js';

interface Entry {
  value: AuthContext | null; // null: no such active key (negative cache, so garbage keys cannot hammer Postgres)
  expires: number;
}

interface KeyRow extends FeeRow {
  id: string;
  prefix: string;
  business_id: string;
  environment: Environment;
  scopes: string[];
  allowed_ips: string[];
  rate_limit: number;
  rate_window_seconds: number;
  revoked_at: Date | null;
  name: string;
  status: string;
  live_enabled: boolean;
  b_created_at: Date;
  b_updated_at: Date;
}

const MAX_ENTRIES = 10_000;

/** Short in-process cache of key hash -> auth context. Revocations also arrive over Redis pub/sub and clear it. */
export class ApiKeyCache {
  private entries = new Map<string, Entry>();
  /** Bumped by clear(): a lookup that started before a revocation must not cache what it read. */
  private generation = 0;

  constructor(private readonly ds: DataSource, private readonly ttlMs: number) {}

  async lookup(hash: string): Promise<AuthContext | null> {
    const now = Date.now();
    const hit = this.entries.get(hash);
    if (hit && hit.expires > now) return hit.value;
    const generation = this.generation;
    const rows: KeyRow[] = await this.ds.query(
      `SELECT k.id, k.prefix, k.business_id, k.environment, k.scopes, k.allowed_ips, k.rate_limit, k.rate_window_seconds, k.revoked_at,
              b.name, b.status, b.live_enabled, b.created_at AS b_created_at, b.updated_at AS b_updated_at, ${feeColumns('b')}
         FROM api_keys k JOIN businesses b ON b.id = k.business_id
        WHERE k.key_hash = $1`,
      [hash],
    );
    const row = rows[0];
    const value = row && !row.revoked_at && row.status === 'active' ? toContext(row) : null;
    if (generation !== this.generation) return value; // answered once, never remembered
    if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
    if (this.ttlMs > 0) this.entries.set(hash, { value, expires: now + this.ttlMs });
    return value;
  }

  clear(): void {
    this.generation += 1;
    this.entries.clear();
  }
}

function toContext(row: KeyRow): AuthContext {
  return {
    keyId: row.id,
    keyPrefix: row.prefix,
    businessId: row.business_id,
    businessName: row.name,
    businessStatus: row.status,
    liveEnabled: row.live_enabled,
    businessCreatedAt: row.b_created_at,
    businessUpdatedAt: row.b_updated_at,
    platformFee: feeFromRow(row),
    environment: row.environment,
    scopes: new Set(row.scopes as Scope[]),
    allowedIps: row.allowed_ips,
    rateLimit: row.rate_limit,
    rateWindowSeconds: row.rate_window_seconds,
  };
}

/** The channel the admin CLI publishes on when a key or business changes. */
export function keyChangesChannel(prefix: string): string {
  return `${prefix}:api-keys:changed`;
}

/** Subscribes to key changes (revocations, live enablement) so every web process drops its cache at once. */
export function watchKeyChanges(redisUrl: string, prefix: string, cache: ApiKeyCache, createRedis: (url: string) => import('ioredis').Redis): { stop: () => void; subscribed: Promise<unknown> } {
  const sub = createRedis(redisUrl);
  sub.on('message', () => cache.clear());
  // A reconnect may have missed a message: forget everything then, too.
  sub.on('ready', () => cache.clear());
  sub.on('error', () => undefined);
  // Not awaited: with Redis down the web process must still start (reads work without Redis); ioredis
  // subscribes once the connection comes up and re-subscribes after every reconnect.
  const subscribed = sub.subscribe(keyChangesChannel(prefix)).catch(() => undefined);
  return { stop: () => sub.disconnect(), subscribed };
}
