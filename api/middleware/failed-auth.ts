import type { Request } from 'express';
import { normalizeIp } from '../../shared/domain/api-keys.js';
import type { Scripts } from './redis-scripts.js';

/**
 * The client's address as the failure counters key it (behind a proxy, TRUST_PROXY decides what req.ip is): an IPv4
 * address as it is, an IPv6 client by its /64, since one subscriber holds a whole /64 and could rotate through it.
 */
export function clientAddress(req: Request): string {
  const ip = normalizeIp(req.ip ?? '');
  if (!ip) return 'unknown';
  return ip.includes(':') ? ipv6Slash64(ip) : ip;
}

/** `2001:db8:1:2:aaaa::1` -> `2001:db8:1:2::/64`: the first four groups of the full address. */
export function ipv6Slash64(ip: string): string {
  const [head, tail = ''] = ip.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = ip.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left;
  return `${groups.slice(0, 4).map((g) => parseInt(g, 16).toString(16)).join(':')}::/64`;
}

/**
 * Failed sign-ins per client address in a fixed window, counted in Redis so every process shares one count. Best
 * effort: with Redis unreachable nothing is counted and nobody is held back (the credential check itself stands).
 */
export class FailedAuth {
  constructor(
    private readonly scripts: Pick<Scripts, 'authFail' | 'authFailCount'>,
    private readonly prefix: string,
    readonly limit: number,
    readonly windowSeconds: number,
  ) {}

  /** Without counting: the seconds the address must wait once it has used up its failures, else 0. */
  async blockedFor(ip: string): Promise<number> {
    try {
      const [count, ttl] = await this.scripts.authFailCount(this.key(ip));
      return count >= this.limit ? Math.max(1, ttl) : 0;
    } catch {
      return 0;
    }
  }

  /** Counts one failure: the address's count in this window and the seconds until it resets; null without Redis. */
  async fail(ip: string): Promise<{ count: number; resetSeconds: number } | null> {
    try {
      const [count, ttl] = await this.scripts.authFail(this.key(ip), this.windowSeconds);
      return { count, resetSeconds: Math.max(1, ttl) };
    } catch {
      return null;
    }
  }

  private key(ip: string): string {
    return `${this.prefix}:${ip}`;
  }
}
