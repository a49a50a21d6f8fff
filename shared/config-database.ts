// The database's settings: where the running processes connect (the pooler, when there is one), where migrations and
// admin commands connect (always direct), each process's pool, prepared statements and the statement timeout.
import { ConfigError } from './config-error.js';

export interface DatabaseSettings {
  /** Direct to PostgreSQL: the release phase (migrations) and admin commands. */
  databaseUrl: string;
  databaseSsl: false | { rejectUnauthorized: boolean };
  /**
   * A transaction-mode connection pooler in front of the same database (PgBouncer), for the web process and the
   * worker pools; null: they connect directly too. DATABASE_CONNECTION_POOL_URL (Heroku's name); or, with
   * DATABASE_DIRECT_URL set (hosts that hand out a pooled DATABASE_URL and an unpooled twin), DATABASE_URL.
   */
  databasePoolUrl: string | null;
  databasePoolSsl: false | { rejectUnauthorized: boolean };
  /**
   * Named prepared statements (shared/db/prepared-client.ts): true or false when DATABASE_PREPARE says so; null: on
   * for a direct connection, off through the pooler (a transaction-mode pooler without prepared-statement support
   * hands a statement prepared on one server connection to a client that lands on another).
   */
  databasePrepare: boolean | null;
  /** DATABASE_STATEMENT_TIMEOUT_MS: set per transaction (SET LOCAL) and as the role's default in the database (0: none). */
  databaseStatementTimeoutMs: number;
  /** DATABASE_POOL_SIZE: connections per process; null: each process's default (shared/db/pool-sizes.ts). */
  databasePoolSize: number | null;
}

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\]|)$/i;

/**
 * A PostgreSQL URL without `sslmode` (pg would let it override the ssl option), and the ssl option it asked for. With
 * no `sslmode`, production connects to a host other than this machine over TLS, unverified, as `sslmode=require`
 * would: Heroku Postgres hands out a DATABASE_URL without it and refuses plain connections (`sslmode=disable` opts out).
 */
export function databaseSettings(rawUrl: string, name = 'DATABASE_URL', production = false): { url: string; ssl: DatabaseSettings['databaseSsl'] } {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new ConfigError(`${name} is not a valid URL`);
  }
  const mode = url.searchParams.get('sslmode');
  url.searchParams.delete('sslmode');
  if (!mode) return { url: url.toString(), ssl: production && !LOOPBACK.test(url.hostname) ? { rejectUnauthorized: false } : false };
  if (mode === 'disable') return { url: url.toString(), ssl: false };
  const verify = mode === 'verify-full' || mode === 'verify-ca';
  return { url: url.toString(), ssl: { rejectUnauthorized: verify } };
}

function onOff(name: string, raw: string | undefined): boolean | null {
  if (raw === undefined || raw === '') return null;
  if (raw === 'on' || raw === 'off') return raw === 'on';
  throw new ConfigError(`${name} must be on or off (unset: on for a direct connection, off through DATABASE_CONNECTION_POOL_URL)`);
}

function count(env: NodeJS.ProcessEnv, name: string, fallback: number | null, min: number): number | null {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min) throw new ConfigError(`${name} must be an integer >= ${min}`);
  return Number(raw);
}

export function databaseConfig(env: NodeJS.ProcessEnv): DatabaseSettings {
  // DATABASE_DIRECT_URL set: DATABASE_URL is the pooled one (unless DATABASE_CONNECTION_POOL_URL names the pooler).
  const twin = env.DATABASE_DIRECT_URL || '';
  const production = env.NODE_ENV === 'production';
  const direct = databaseSettings(twin || env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/rampway', twin ? 'DATABASE_DIRECT_URL' : 'DATABASE_URL', production);
  const poolName = env.DATABASE_CONNECTION_POOL_URL ? 'DATABASE_CONNECTION_POOL_URL' : twin && env.DATABASE_URL ? 'DATABASE_URL' : null;
  const pooled = poolName ? databaseSettings(env[poolName]!, poolName, production) : null;
  const rejectUnauthorized = env.DATABASE_SSL_REJECT_UNAUTHORIZED === 'true';
  const ssl = (s: DatabaseSettings['databaseSsl']) => (rejectUnauthorized && s ? { rejectUnauthorized: true } : s);
  return {
    databaseUrl: direct.url,
    databaseSsl: ssl(direct.ssl),
    databasePoolUrl: pooled?.url ?? null,
    databasePoolSsl: pooled ? ssl(pooled.ssl) : false,
    databasePrepare: onOff('DATABASE_PREPARE', env.DATABASE_PREPARE),
    databaseStatementTimeoutMs: count(env, 'DATABASE_STATEMENT_TIMEOUT_MS', 30_000, 0)!,
    databasePoolSize: count(env, 'DATABASE_POOL_SIZE', null, 1),
  };
}
