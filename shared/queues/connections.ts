import { Redis, type RedisOptions } from 'ioredis';
import { getConfig } from '../config.js';

function tlsOptions(url: string): RedisOptions {
  if (!url.startsWith('rediss://')) return {};
  // Heroku Redis serves a self-signed certificate: accept it only when configured to.
  return { tls: { rejectUnauthorized: getConfig().redisTlsRejectUnauthorized } };
}

/**
 * The API's profile: fail fast. A command while Redis is unreachable rejects at once, and one that Redis does not
 * answer in time (a stall: failover, partition, a blocked server) rejects after the command timeout, so a request
 * answers 503 (or proceeds unlimited, for reads) instead of hanging.
 */
export function createApiRedis(url = getConfig().redisUrl, commandTimeoutMs = getConfig().redisCommandTimeoutMs): Redis {
  const redis = new Redis(url, {
    ...tlsOptions(url),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: commandTimeoutMs,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
  // Failures surface where commands are made (503 or unlimited reads); the connection's own errors are expected noise while down.
  redis.on('error', () => undefined);
  return redis;
}

/** Resolves when the connection is ready, or after `timeoutMs` (the caller then runs degraded). */
export function whenReady(redis: Redis, timeoutMs = 2000): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      resolve(ok);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    redis.on('ready', onReady);
  });
}

/** The workers' profile: wait for Redis to come back rather than fail jobs. BullMQ requires maxRetriesPerRequest: null. */
export function createWorkerRedis(url = getConfig().redisUrl): Redis {
  const redis = new Redis(url, {
    ...tlsOptions(url),
    maxRetriesPerRequest: null,
    retryStrategy: (times) => Math.min(times * 500, 5000),
  });
  redis.on('error', () => undefined); // ioredis reconnects by itself; BullMQ reports job-level failures
  return redis;
}
