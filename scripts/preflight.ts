import pg from 'pg';
import { Redis } from 'ioredis';
import { databaseSettings } from '../shared/config.js';

const PG_HINT = "start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start  (or set DATABASE_URL)";
/** The hint names the port REDIS_URL asks for, not Redis's default. */
const redisHint = (url: URL) => `start it with: redis-server --daemonize yes --port ${url.port || '6379'}  (or set REDIS_URL)`;

export class PreflightError extends Error {}

/**
 * Makes sure the database in the URL exists. It connects to that database first (with the URL's SSL
 * settings), which is all a hosted database like Heroku's allows; only when the server says the database
 * does not exist (3D000) does it connect to `postgres` and create it.
 */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const { url: target, ssl } = databaseSettings(databaseUrl, 'DATABASE_URL', process.env.NODE_ENV === 'production');
  const url = new URL(target);
  const name = decodeURIComponent(url.pathname.slice(1));
  const probe = new pg.Client({ connectionString: target, ssl, connectionTimeoutMillis: 3000 });
  try {
    await probe.connect();
    await probe.end();
    return;
  } catch (err) {
    await probe.end().catch(() => undefined);
    if ((err as { code?: string }).code !== '3D000') {
      throw new PreflightError(`PostgreSQL is unreachable at ${url.host} (${(err as Error).message}); ${PG_HINT}`);
    }
  }
  const admin = new URL(target);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString(), ssl, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`).catch((err: { code?: string }) => {
      if (err.code !== '42P04') throw err; // created meanwhile by a concurrent run
    });
  } catch (err) {
    throw new PreflightError(`database "${name}" does not exist and could not be created at ${url.host} (${(err as Error).message})`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function ensureRedis(redisUrl: string): Promise<void> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 3000 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    throw new PreflightError(`Redis is unreachable at ${new URL(redisUrl).host} (${(err as Error).message}); ${redisHint(new URL(redisUrl))}`);
  } finally {
    redis.disconnect();
  }
}
