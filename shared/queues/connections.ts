import { Redis, type RedisOptions } from 'ioredis';
import { getConfig } from '../config.js';

function tlsOptions(url: string): RedisOptions {
  if (!url.startsWith('rediss://')) return {};
  // Heroku Redis serves a self-signed certificate: accept it only when configured to.
  return { tls: { rejectUnauthorized: getConfig().redisTlsRejectUnauthorized } };
}

/**
 * The API's profile: fail fast. A command while Redis is unreachable rejects at once,
 * so a request answers 503 (or proceeds unlimited, for reads) instead of hanging.
 */
export function createApiRedis(url = getConfig().redisUrl): Redis {
  return new Redis(url, {
    ...tlsOptions(url),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
}

/** The workers' profile: wait for Redis to come back rather than fail jobs. BullMQ requires maxRetriesPerRequest: null. */
export function createWorkerRedis(url = getConfig().redisUrl): Redis {
  return new Redis(url, {
    ...tlsOptions(url),
    maxRetriesPerRequest: null,
    retryStrategy: (times) => Math.min(times * 500, 5000),
  });
}
