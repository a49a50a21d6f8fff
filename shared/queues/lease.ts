import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';

// A lease in Redis that says "one of us is doing this now" (a chain's scan): short, and renewed while its holder
// works, so a holder that dies (SIGKILL, a lost dyno) keeps the work from everyone else for one lease at most, never
// for as long as the longest run it might have had. A lease is an optimisation (two holders at once would duplicate
// work, not money): work that could not renew goes on to its end.

const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0`;
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`;

/** Runs `work` under the lease `key` (renewed every third of `ttlMs`); answers `busy` when another holds it. */
export async function withLease<T>(redis: Redis, key: string, ttlMs: number, work: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }> {
  const token = randomUUID();
  if ((await redis.set(key, token, 'PX', ttlMs, 'NX')) !== 'OK') return { ran: false };
  const renewal = setInterval(() => void redis.eval(RENEW, 1, key, token, String(ttlMs)).catch(() => undefined), Math.max(1, Math.floor(ttlMs / 3)));
  renewal.unref();
  try {
    return { ran: true, value: await work() };
  } finally {
    clearInterval(renewal);
    // Only our own: one that lapsed and was taken by the next holder stays its.
    await redis.eval(RELEASE, 1, key, token).catch(() => undefined);
  }
}
