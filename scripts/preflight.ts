import pg from 'pg';
import { Redis } from 'ioredis';

const PG_HINT = "start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start  (or set DATABASE_URL)";
const REDIS_HINT = 'start it with: redis-server --daemonize yes --port 6379  (or set REDIS_URL)';

export class PreflightError extends Error {}

/** Creates the database named in the URL when the server is up but the database is not there yet. */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  admin.searchParams.delete('sslmode');
  const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
  } catch (err) {
    throw new PreflightError(`PostgreSQL is unreachable at ${url.host} (${(err as Error).message}); ${PG_HINT}`);
  }
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) {
      await client.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`).catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err; // created meanwhile by a concurrent run
      });
    }
  } finally {
    await client.end();
  }
}

export async function ensureRedis(redisUrl: string): Promise<void> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 3000 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    throw new PreflightError(`Redis is unreachable at ${new URL(redisUrl).host} (${(err as Error).message}); ${REDIS_HINT}`);
  } finally {
    redis.disconnect();
  }
}
