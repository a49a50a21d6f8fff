import { createHash, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import type { Environment } from './chains.js';

export const SCOPES = [
  'customers:read', 'customers:write',
  'beneficiaries:read', 'beneficiaries:write',
  'wallets:read', 'wallets:write',
  'quotes:read', 'quotes:write',
  'transactions:read', 'transactions:write',
  'payment_intents:read', 'payment_intents:write',
  'treasury:read', 'treasury:write',
  'payouts:read', 'payouts:write',
  'webhooks:read', 'webhooks:write',
  'liquidation_addresses:read', 'liquidation_addresses:write',
  'sandbox:write',
] as const;
export type Scope = (typeof SCOPES)[number];

export const KEY_PREFIXES: Record<Environment, string> = { sandbox: 'svc_test_', live: 'svc_live_' };
const KEY_PATTERN = /^svc_(test|live)_[A-Za-z0-9_-]{43,128}$/;
export const MAX_ALLOWED_IPS = 10;

export interface GeneratedKey {
  key: string;
  prefix: string;
  hash: string;
}

/** 32 random bytes, base64url: 43 characters of secret after the environment prefix. */
export function generateApiKey(environment: Environment): GeneratedKey {
  const key = KEY_PREFIXES[environment] + randomBytes(32).toString('base64url');
  return { key, prefix: key.slice(0, KEY_PREFIXES[environment].length + 6), hash: hashApiKey(key) };
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** The environment a well-formed key names, or null for anything that is not a key of ours. */
export function keyEnvironment(key: string): Environment | null {
  const match = KEY_PATTERN.exec(key);
  if (!match) return null;
  return match[1] === 'test' ? 'sandbox' : 'live';
}

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** One spelling per address: IPv4-mapped IPv6 becomes IPv4, IPv6 is compressed and lower-cased. Null if not an IP. */
export function normalizeIp(raw: string): string | null {
  let ip = raw.trim();
  if (ip.startsWith('[') && ip.endsWith(']')) ip = ip.slice(1, -1);
  if (ip.includes('%')) return null; // a zone id (fe80::1%eth0) names no address an allowlist can hold
  const kind = isIP(ip);
  if (kind === 4) return ip;
  if (kind !== 6) return null;
  const compressed = new URL(`http://[${ip}]/`).hostname.slice(1, -1);
  // IPv4-mapped IPv6 (::ffff:127.0.0.1, which the URL parser spells ::ffff:7f00:1) is the IPv4 address itself.
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(compressed);
  if (!mapped) return compressed;
  const [hi, lo] = [parseInt(mapped[1], 16), parseInt(mapped[2], 16)];
  return [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
}
