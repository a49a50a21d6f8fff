// What each process must be given in production, and nothing more (CONTRACT §15, §18): one table, read at boot by
// loadConfig (a process declares what it is with configureFor) and by `npm run admin -- config-check`. A variable
// not named here has a default that works, or turns a feature off. To require a new variable of a process, add it
// to SETTINGS and to that process's row of NEEDS.
import { validateMnemonic } from '@scure/bip39';
import { wordlist as english } from '@scure/bip39/wordlists/english';
import { xpubProblem } from './chain/hd-wallet.js';
import { checksumAddress } from './chain/address.js';
import { ConfigError } from './config-error.js';
import { databaseSettings } from './config-database.js';
import { DEV_ENCRYPTION_KEY, parseEncryptionKeys } from './config-encryption.js';

/** The processes of the Procfile (`worker` is every pool in one), and `release`, the migrations. */
export const PROCESSES = ['web', 'release', 'pricing', 'settlement', 'providers', 'sandbox', 'webhooks'] as const;
export type ProcessName = (typeof PROCESSES)[number];

export interface Setting {
  /** One line for an operator (config-check, app.json). */
  about: string;
  /** What is wrong with a value that is set, or null. Never repeats the value. */
  problem?: (value: string) => string | null;
  /** A random secret fits (app.json's generator). */
  generated?: true;
}

const problemOf = (check: () => void): string | null => {
  try {
    check();
    return null;
  } catch (err) {
    return err instanceof ConfigError ? err.message : 'cannot be read';
  }
};
const url = (protocols: string[], example: string) => (value: string) =>
  URL.canParse(value) && protocols.includes(new URL(value).protocol) ? null : `is not a ${example} URL`;
const mnemonic = (value: string) => (validateMnemonic(value.trim().split(/\s+/).join(' '), english) ? null : 'is not a valid BIP-39 English mnemonic');
const address = (value: string) => {
  const checked = checksumAddress(value.trim());
  return 'problem' in checked ? `is not a valid EVM address (${checked.problem.replace(/_/g, ' ')})` : null;
};

export const SETTINGS = {
  NODE_ENV: { about: 'production: every production guard on (required secrets, no loopback webhooks, no test switches)', problem: (v) => (v === 'production' ? null : 'must be production') },
  DATABASE_URL: {
    about: 'PostgreSQL, e.g. postgres://user:pass@host:5432/db?sslmode=require (Heroku Postgres sets it)',
    problem: (v) => url(['postgres:', 'postgresql:'], 'postgres://')(v) ?? problemOf(() => databaseSettings(v)),
  },
  REDIS_URL: { about: 'Redis with maxmemory-policy noeviction, redis:// or rediss:// (Heroku Redis sets it)', problem: url(['redis:', 'rediss:'], 'redis:// or rediss://') },
  ENCRYPTION_KEYS: {
    about: 'key-id:base64 32-byte key, comma-separated, the encrypting key first (openssl rand -base64 32); beneficiary and payer details, webhook secrets',
    problem: (v) => problemOf(() => parseEncryptionKeys(v)) ?? (parseEncryptionKeys(v)[0].key.equals(DEV_ENCRYPTION_KEY) ? 'lists the public development key first; list your own key first' : null),
  },
  IDEMPOTENCY_SECRET: { about: 'keys the request fingerprints kept in Redis (any long random string)', generated: true },
  WALLET_XPUB: { about: 'sandbox deposit and managed-wallet addresses: npm run admin -- wallet-xpub --environment sandbox', problem: (v) => xpubProblem(v.trim()) },
  WALLET_TREASURY_ADDRESS: { about: 'the sandbox treasury hot wallet: npm run admin -- treasury-address --environment sandbox', problem: address },
  WALLET_XPUB_LIVE: { about: 'live deposit and managed-wallet addresses: npm run admin -- wallet-xpub --environment live', problem: (v) => xpubProblem(v.trim()) },
  WALLET_TREASURY_ADDRESS_LIVE: { about: 'the live treasury hot wallet: npm run admin -- treasury-address --environment live', problem: address },
  WALLET_SEED: { about: 'BIP-39 mnemonic of the sandbox keys; only processes that sign (the settlement pool) get it', problem: mnemonic },
  WALLET_SEED_LIVE: { about: 'BIP-39 mnemonic of the live keys; only processes that sign (the settlement pool) get it', problem: mnemonic },
} satisfies Record<string, Setting>;
export type SettingName = keyof typeof SETTINGS;

const PUBLIC_WALLETS: SettingName[] = ['WALLET_XPUB', 'WALLET_TREASURY_ADDRESS', 'WALLET_XPUB_LIVE', 'WALLET_TREASURY_ADDRESS_LIVE'];
const SEEDS: SettingName[] = ['WALLET_SEED', 'WALLET_SEED_LIVE'];
const SERVICE: SettingName[] = ['NODE_ENV', 'DATABASE_URL', 'REDIS_URL', 'ENCRYPTION_KEYS'];

/**
 * Per process, every variable production requires of it: what its code may read without a usable default. Only the
 * settlement pool signs, so it alone gets the seeds (and derives the public keys from them); the web process alone
 * fingerprints requests.
 */
export const NEEDS: Record<ProcessName, SettingName[]> = {
  release: ['NODE_ENV', 'DATABASE_URL'],
  web: [...SERVICE, 'IDEMPOTENCY_SECRET', ...PUBLIC_WALLETS],
  pricing: [...SERVICE, ...PUBLIC_WALLETS],
  settlement: [...SERVICE, ...SEEDS],
  providers: [...SERVICE, ...PUBLIC_WALLETS],
  sandbox: [...SERVICE, ...PUBLIC_WALLETS],
  webhooks: [...SERVICE, ...PUBLIC_WALLETS],
};

/**
 * What one process made of several needs (a worker running more than one pool): the union, except that a process
 * holding the seeds derives the public keys from them and needs none given.
 */
export function needsOf(processes: readonly ProcessName[]): SettingName[] {
  const all = new Set(processes.flatMap((p) => NEEDS[p]));
  if (SEEDS.every((s) => all.has(s))) for (const name of PUBLIC_WALLETS) all.delete(name);
  return (Object.keys(SETTINGS) as SettingName[]).filter((name) => all.has(name));
}

export interface SettingReport {
  name: SettingName;
  state: 'ok' | 'missing' | 'malformed';
  /** Why a value that is set cannot be used (never the value). */
  problem?: string;
}

/** Each needed variable: set and usable, missing, or malformed. */
export function checkSettings(env: NodeJS.ProcessEnv, names: readonly SettingName[]): SettingReport[] {
  return names.map((name) => {
    const value = env[name];
    if (value === undefined || value.trim() === '') return { name, state: 'missing' };
    const problem = (SETTINGS[name] as Setting).problem?.(value) ?? null;
    return problem ? { name, state: 'malformed', problem } : { name, state: 'ok' };
  });
}

const listed = (names: string[]) => (names.length === 1 ? names[0] : `${names.slice(0, -1).join(', ')} and ${names.at(-1)}`);

/** At boot in production: every missing or malformed variable this process needs, in one error. */
export function requireSettings(env: NodeJS.ProcessEnv, names: readonly SettingName[], who: string): void {
  const report = checkSettings(env, names);
  const missing = report.filter((r) => r.state === 'missing').map((r) => r.name);
  const malformed = report.filter((r) => r.state === 'malformed').map((r) => `${r.name} ${r.problem}`);
  if (!missing.length && !malformed.length) return;
  const parts = [missing.length ? `needs ${listed(missing)}` : '', ...malformed].filter(Boolean);
  throw new ConfigError(`NODE_ENV=production: ${who} ${parts.join('; ')} (npm run admin -- config-check lists what each process needs)`);
}
