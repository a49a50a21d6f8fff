// Parsers for the live rails' settings (M-Pesa Daraja, the test seam for the live chain), kept beside config.ts so
// it stays readable; config.ts alone hands them the environment.
import { isIP } from 'node:net';
import { ConfigError } from './config-error.js';

export function darajaBaseUrl(raw: string | undefined): string {
  const value = raw || 'https://sandbox.safaricom.co.ke';
  if (!/^https?:\/\/[^/]/.test(value) || !URL.canParse(value)) throw new ConfigError('DARAJA_BASE_URL must be an absolute http(s) URL');
  return value.replace(/\/+$/, '');
}

export function allowedIps(raw: string | undefined): string[] {
  const entries = (raw ?? '').split(',').map((e) => e.trim()).filter(Boolean);
  const bad = entries.find((e) => !isIP(e));
  if (bad !== undefined) throw new ConfigError('DARAJA_CALLBACK_ALLOWED_IPS must be comma-separated IP addresses');
  return entries;
}

/** A block height (SETTLEMENT_START_BLOCK_<CHAIN>), or null when unset. */
export function blockNumber(name: string, raw: string | undefined): bigint | null {
  if (raw === undefined || raw === '') return null;
  if (!/^\d{1,20}$/.test(raw)) throw new ConfigError(`${name} must be a block number (a whole number)`);
  return BigInt(raw);
}

export function liveChainOverride(raw: string | undefined, production: boolean): 'sandbox' | null {
  if (!raw) return null;
  if (raw !== 'sandbox' || production) throw new ConfigError('RAMPWAY_TEST_LIVE_CHAIN is for tests only: "sandbox", never in production');
  return 'sandbox';
}

/**
 * A live M-Pesa rail set up halfway would take money it cannot pay out (or the reverse): any DARAJA_ credential set
 * means all of them, and the callback token and public URL too.
 */
export function checkDaraja(env: NodeJS.ProcessEnv): void {
  const names = ['DARAJA_CONSUMER_KEY', 'DARAJA_CONSUMER_SECRET', 'DARAJA_SHORTCODE', 'DARAJA_PASSKEY', 'DARAJA_B2C_SHORTCODE', 'DARAJA_INITIATOR_NAME',
    'DARAJA_SECURITY_CREDENTIAL', 'DARAJA_CALLBACK_TOKEN'];
  const set = names.filter((n) => env[n]);
  if (set.length === 0) return;
  const missing = names.filter((n) => !env[n]);
  if (!env.PUBLIC_BASE_URL) missing.push('PUBLIC_BASE_URL');
  if (missing.length) throw new ConfigError(`The M-Pesa Daraja rail is half configured: ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} missing`);
  if (!/^[A-Za-z0-9_-]{16,200}$/.test(env.DARAJA_CALLBACK_TOKEN!)) throw new ConfigError('DARAJA_CALLBACK_TOKEN must be 16 to 200 characters of A-Z, a-z, 0-9, _ and -');
}
