import type { NextFunction, Request, Response } from 'express';
import type { AppDeps } from '../context.js';
import { AppError } from '../../shared/errors.js';
import { hashApiKey, keyEnvironment, normalizeIp } from '../../shared/domain/api-keys.js';
import type { ApiKeyCache } from './api-key-cache.js';

// RFC 7235: the auth scheme is case-insensitive.
const BEARER = /^Bearer ([^\s]+)$/i;

/** Resolves the bearer key to a business and environment, and enforces the key's IP allowlist before anything else. */
export function authenticate(deps: AppDeps, cache: ApiKeyCache) {
  // Every refusal counts against the client's address: a guessed key (401) and a leaked key used from elsewhere (403).
  // Its window is the one a refused client is limited by, so the answer carries it as the rate headers.
  const refused = async (req: Request, error: AppError): Promise<AppError> => {
    const ip = normalizeIp(req.ip ?? '') ?? 'unknown';
    try {
      const [count, ttl] = await deps.scripts.authFail(`${deps.config.redisPrefix}:authfail:${ip}`, deps.config.authFailWindowSeconds);
      req.res?.setHeader('X-RateLimit-Limit', String(deps.config.authFailLimit));
      req.res?.setHeader('X-RateLimit-Remaining', String(Math.max(0, deps.config.authFailLimit - count)));
      req.res?.setHeader('X-RateLimit-Reset', String(Math.max(1, ttl)));
      if (count > deps.config.authFailLimit) {
        return new AppError('rate_limited', 'Too many failed authentication attempts from this address.', undefined, Math.max(1, ttl));
      }
    } catch {
      // Redis down: failed-auth limiting is best effort; the refusal stands.
    }
    return error;
  };
  const unauthorized = (req: Request, message: string) => refused(req, new AppError('unauthorized', message));

  return async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    try {
      const header = req.headers.authorization;
      if (!header) return next(await unauthorized(req, 'Missing API key: send Authorization: Bearer <key>.'));
      const key = BEARER.exec(header)?.[1];
      if (!key || !keyEnvironment(key)) return next(await unauthorized(req, 'Malformed API key.'));
      let auth;
      try {
        auth = await cache.lookup(hashApiKey(key));
      } catch {
        return next(AppError.unavailable('Authentication is temporarily unavailable.'));
      }
      if (!auth) return next(await unauthorized(req, 'Invalid or revoked API key.'));
      if (auth.allowedIps.length > 0) {
        const ip = normalizeIp(req.ip ?? '');
        if (!ip || !auth.allowedIps.includes(ip)) {
          return next(await refused(req, new AppError('ip_not_allowed', 'This API key may not be used from this IP address.')));
        }
      }
      req.state.auth = auth;
      next();
    } catch (err) {
      next(err);
    }
  };
}
