import type { DataSource } from 'typeorm';
import type { AuthContext } from '../context.js';
import type { Scope } from '../../shared/domain/api-keys.js';
import type { Environment } from '../../shared/domain/chains.js';
import { feeColumns, feeFromRow, type FeeRow } from '../../shared/domain/fees.js';
import { Lru } from '../../shared/lru.js';

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

/** Entries of each kind a process keeps: about 10 MB of valid keys at most. */
const CAPACITY = 10_000;

/** What this process knows of a key hash without asking PostgreSQL. */
export interface Seen {
  /** The key's context, or null: no active key has this hash. */
  auth: AuthContext | null;
  /** Within API_KEY_CACHE_TTL_MS of the read; a stale entry is only ever a key that was valid (see peek). */
  fresh: boolean;
}

/**
 * Short in-process cache of key hash -> auth context, evicting the least recently used. Valid keys and hashes that
 * are no active key (a negative cache, so a repeated bad key does not reach PostgreSQL) are kept apart: a flood of
 * guesses evicts only guesses. Revocations also arrive over Redis pub/sub and clear it.
 */
export class ApiKeyCache {
  private readonly valid: Lru<string, { auth: AuthContext; expires: number }>;
  private readonly invalid: Lru<string, number>;
  /** Bumped by clear(): a lookup that started before a revocation must not cache what it read. */
  private generation = 0;

  constructor(private readonly ds: DataSource, private readonly ttlMs: number, capacity = CAPACITY) {
    this.valid = new Lru(capacity);
    this.invalid = new Lru(capacity);
  }

  /**
   * Fresh entries of either kind; a valid key's expired entry too (not fresh), so the caller may read it again where
   * it would not read an unknown key. Undefined: nothing known, PostgreSQL must say.
   */
  peek(hash: string): Seen | undefined {
    const now = Date.now();
    const known = this.valid.get(hash);
    if (known) return { auth: known.auth, fresh: known.expires > now };
    const expires = this.invalid.get(hash);
    if (expires !== undefined && expires > now) return { auth: null, fresh: true };
    return undefined;
  }

  /** The fresh entry, else PostgreSQL's answer (then remembered). */
  async lookup(hash: string): Promise<AuthContext | null> {
    const seen = this.peek(hash);
    return seen?.fresh ? seen.auth : this.load(hash);
  }

  /** Reads the key from PostgreSQL and remembers the answer. */
  async load(hash: string): Promise<AuthContext | null> {
    const now = Date.now();
    const generation = this.generation;
    const rows: KeyRow[] = await this.ds.query(
      `SELECT k.id, k.prefix, k.business_id, k.environment, k.scopes, k.allowed_ips, k.rate_limit, k.rate_window_seconds, k.revoked_at,
              b.name, b.status, b.live_enabled, b.created_at AS b_created_at, b.updated_at AS b_updated_at, ${feeColumns('b')}
         FROM api_keys k JOIN businesses b ON b.id = k.business_id
        WHERE k.key_hash = $1`,
      [hash],
    );
    const row = rows[0];
    const auth = row && !row.revoked_at && row.status === 'active' ? toContext(row) : null;
    if (generation !== this.generation) return auth; // answered once, never remembered
    if (auth) {
      this.invalid.delete(hash);
      // Kept even with the cache off (TTL 0, always stale): a known valid key is then still read without the failure check.
      this.valid.set(hash, { auth, expires: now + this.ttlMs });
    } else {
      this.valid.delete(hash);
      if (this.ttlMs > 0) this.invalid.set(hash, now + this.ttlMs);
    }
    return auth;
  }

  clear(): void {
    this.generation += 1;
    this.valid.clear();
    this.invalid.clear();
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
