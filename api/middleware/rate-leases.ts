/**
 * Reads counted against a key's rate limit in leases, so most reads cost no Redis round trip: a read that finds no
 * leased request left asks Redis to count a few at once (a hundredth of the limit, at most LEASE_MAX, never past the
 * limit) and keeps the rest for the reads after it, in this process, until the window ends. Writes go to Redis every
 * time (their idempotency claim is there), and use a leased request when there is one instead of counting another.
 *
 * The limit still holds across processes: every request a process answers was counted in Redis before it was
 * answered, when leased. What a lease costs is at most one lease's unused requests per process at the window's end,
 * refused to others that window (a hundredth of the limit per web process). A limit under 100 leases one request at
 * a time: the same round trip per request as without leases. X-RateLimit-Remaining is the window's count less what
 * this process holds unused: exact with one web process, a little low with several.
 */
const LEASE_SHARE = 100;
const LEASE_MAX = 100;

/** How many requests a read asks Redis to count at once. */
export const leaseSize = (limit: number): number => Math.max(1, Math.min(LEASE_MAX, Math.floor(limit / LEASE_SHARE)));

interface Lease {
  /** Requests counted in Redis and not yet answered by this process. */
  unused: number;
  /** The window's count in Redis when last seen (every lease and write it counted, unused ones included). */
  count: number;
  /** When the window ends (ms since the epoch): what is unused then is gone. */
  endsAt: number;
  /** A lease being asked for: concurrent reads wait for it instead of each asking for one. */
  pending: Promise<void> | null;
}

export interface LeaseHeaders {
  remaining: number;
  resetSeconds: number;
}

export class RateLeases {
  private readonly leases = new Map<string, Lease>();

  /** One leased request for `key` in its current window, with the headers to answer with; null when none is left. */
  take(key: string, limit: number, now = Date.now()): LeaseHeaders | null {
    const lease = this.leases.get(key);
    if (!lease || lease.unused < 1 || now >= lease.endsAt) return null;
    lease.unused -= 1;
    return this.headers(lease, limit, now);
  }

  /** A lease being asked for, to wait on (null: none). */
  pending(key: string): Promise<void> | null {
    return this.leases.get(key)?.pending ?? null;
  }

  /** Marks a lease for `key` as being asked for until `asked` settles. */
  asking(key: string, asked: Promise<unknown>): void {
    const lease = this.lease(key);
    const pending = asked.then(() => undefined, () => undefined).finally(() => {
      if (lease.pending === pending) lease.pending = null;
    });
    lease.pending = pending;
  }

  /**
   * What Redis answered: the window's `count` after counting `counted` requests for this process, `used` of them
   * (or of those held) by the request that asked. Answers the headers for that request.
   */
  record(key: string, limit: number, reply: { count: number; pttl: number; counted: number; used: number }, now = Date.now()): LeaseHeaders {
    const lease = this.lease(key);
    const endsAt = now + Math.max(0, reply.pttl);
    // A new window: what was held belonged to the old one.
    if (reply.count <= reply.counted || now >= lease.endsAt) lease.unused = 0;
    lease.unused = Math.max(0, lease.unused + reply.counted - reply.used);
    lease.count = reply.count;
    lease.endsAt = endsAt;
    if (this.leases.size > 100_000) this.sweep(now);
    return this.headers(lease, limit, now);
  }

  private headers(lease: Lease, limit: number, now: number): LeaseHeaders {
    return { remaining: Math.max(0, limit - (lease.count - lease.unused)), resetSeconds: Math.max(1, Math.ceil((lease.endsAt - now) / 1000)) };
  }

  private lease(key: string): Lease {
    let lease = this.leases.get(key);
    if (!lease) this.leases.set(key, (lease = { unused: 0, count: 0, endsAt: 0, pending: null }));
    return lease;
  }

  private sweep(now: number): void {
    for (const [key, lease] of this.leases) if (now >= lease.endsAt && !lease.pending) this.leases.delete(key);
  }
}
