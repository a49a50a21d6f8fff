// The MTN MoMo rail's settings (CONTRACT §17), kept beside config.ts so it stays readable; config.ts alone hands them
// the environment. All or none, like Daraja: a half-configured rail refuses to boot, naming what is missing.
import { ConfigError } from './config-error.js';
import { getCorridor } from './domain/corridors.js';

export interface MomoSettings {
  /** MTN's API root (default: its sandbox). */
  baseUrl: string;
  /** X-Target-Environment: `sandbox`, `mtnuganda`, `mtnghana`, ... */
  targetEnvironment: string;
  /** The live currencies this account serves (mobile money on the `mtn` network); empty: the rail is off. */
  currencies: string[];
  collection: { subscriptionKey: string | null; apiUser: string | null; apiKey: string | null };
  disbursement: { subscriptionKey: string | null; apiUser: string | null; apiKey: string | null };
  /** Secret path segment of every callback URL handed to MTN. */
  callbackToken: string | null;
  /** How long a request waits for its callback before its status is asked (GET requesttopay / transfer). */
  statusQueryAfterMs: number;
  /** Each call to MTN (token, request, status) is abandoned after this long: a temporary failure. */
  requestTimeoutMs: number;
}

export const MOMO_NETWORK = 'mtn';

const CREDENTIALS = [
  'MOMO_CURRENCIES', 'MOMO_COLLECTION_SUBSCRIPTION_KEY', 'MOMO_COLLECTION_API_USER', 'MOMO_COLLECTION_API_KEY',
  'MOMO_DISBURSEMENT_SUBSCRIPTION_KEY', 'MOMO_DISBURSEMENT_API_USER', 'MOMO_DISBURSEMENT_API_KEY', 'MOMO_CALLBACK_TOKEN',
];

function currencies(raw: string | undefined): string[] {
  const list = (raw ?? '').split(',').map((c) => c.trim().toUpperCase()).filter(Boolean);
  for (const currency of list) {
    const corridor = getCorridor(currency, 'mobile_money');
    const networks = corridor?.fields.find((f) => f.name === 'mobile_network')?.enum ?? [];
    if (!corridor || !networks.includes(MOMO_NETWORK) || !corridor.directions.includes('onramp')) {
      throw new ConfigError(`MOMO_CURRENCIES: ${currency} has no mobile money corridor on the mtn network with on- and off-ramps`);
    }
  }
  return [...new Set(list)];
}

/** Any MOMO_ credential set means all of them, the callback token and the public URL too. */
export function checkMomo(env: NodeJS.ProcessEnv): void {
  const set = CREDENTIALS.filter((n) => env[n]);
  if (set.length === 0) return;
  const missing = CREDENTIALS.filter((n) => !env[n]);
  if (!env.PUBLIC_BASE_URL) missing.push('PUBLIC_BASE_URL');
  if (missing.length) throw new ConfigError(`The MTN MoMo rail is half configured: ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} missing`);
  if (!/^[A-Za-z0-9_-]{16,200}$/.test(env.MOMO_CALLBACK_TOKEN!)) throw new ConfigError('MOMO_CALLBACK_TOKEN must be 16 to 200 characters of A-Z, a-z, 0-9, _ and -');
  if (!/^[a-z0-9]{2,40}$/.test(env.MOMO_TARGET_ENVIRONMENT || 'sandbox')) throw new ConfigError('MOMO_TARGET_ENVIRONMENT must be MTN\'s environment name (sandbox, mtnuganda, mtnghana, ...)');
}

export function momoSettings(env: NodeJS.ProcessEnv, int: (name: string, fallback: number, min: number) => number): MomoSettings {
  const baseUrl = env.MOMO_BASE_URL || 'https://sandbox.momodeveloper.mtn.com';
  if (!/^https?:\/\/[^/]/.test(baseUrl) || !URL.canParse(baseUrl)) throw new ConfigError('MOMO_BASE_URL must be an absolute http(s) URL');
  return {
    baseUrl: baseUrl.replace(/\/+$/, ''),
    targetEnvironment: env.MOMO_TARGET_ENVIRONMENT || 'sandbox',
    currencies: currencies(env.MOMO_CURRENCIES),
    collection: { subscriptionKey: env.MOMO_COLLECTION_SUBSCRIPTION_KEY || null, apiUser: env.MOMO_COLLECTION_API_USER || null, apiKey: env.MOMO_COLLECTION_API_KEY || null },
    disbursement: { subscriptionKey: env.MOMO_DISBURSEMENT_SUBSCRIPTION_KEY || null, apiUser: env.MOMO_DISBURSEMENT_API_USER || null, apiKey: env.MOMO_DISBURSEMENT_API_KEY || null },
    callbackToken: env.MOMO_CALLBACK_TOKEN || null,
    statusQueryAfterMs: int('MOMO_STATUS_QUERY_AFTER_MS', 60_000, 10),
    requestTimeoutMs: int('MOMO_REQUEST_TIMEOUT_MS', 10_000, 100),
  };
}
