import type { NextFunction, Request, Response } from 'express';
import type { AppDeps, AuthContext } from '../context.js';
import { AppError } from '../../shared/errors.js';
import { hashApiKey, keyEnvironment, normalizeIp } from '../../shared/domain/api-keys.js';
import type { ApiKeyCache } from './api-key-cache.js';
import { FailedAuth, clientAddress } from './failed-auth.js';

// RFC 7235: the auth scheme is case-insensitive.
const BEARER = /^Bearer ([^\s]+)$/i;

const HEADER_FORM = 'the header must be "Authorization: Bearer <key>"';
const MALFORMED_KEY = 'Malformed API key: keys start with svc_test_ (sandbox) or svc_live_ (live); send "Authorization: Bearer <key>".';

/** Why an Authorization header is not `Bearer <key>`, without repeating it (it may be a key). */
function malformedHeader(header: string): string {
  const value = header.trim();
  if (keyEnvironment(value)) return `The Bearer prefix is missing: ${HEADER_FORM}.`;
  if (/^Bearer$/i.test(value)) return `The API key is missing after Bearer: ${HEADER_FORM}.`;
  return `Malformed Authorization header: ${HEADER_FORM}.`;
}

/**
 * Resolves the bearer key to a business and environment, and enforces the key's IP allowlist before anything else.
 * A key this process holds costs no I/O here; an unknown one is read from PostgreSQL only for an address that has
 * failed fewer than AUTH_FAIL_LIMIT times in its window (one Redis read first), so guessing stops at Redis.
 */
export function authenticate(deps: AppDeps, cache: ApiKeyCache) {
  const { authFailLimit, authFailWindowSeconds, redisPrefix } = deps.config;
  const failures = new FailedAuth(deps.scripts, `${redisPrefix}:authfail`, authFailLimit, authFailWindowSeconds);
  // The failure window is the one a refused client is limited by, so its answers carry it as the rate headers.
  const window = (req: Request, remaining: number, resetSeconds: number): void => {
    req.res?.setHeader('X-RateLimit-Limit', String(authFailLimit));
    req.res?.setHeader('X-RateLimit-Remaining', String(Math.max(0, remaining)));
    req.res?.setHeader('X-RateLimit-Reset', String(resetSeconds));
  };
  const tooMany = (req: Request, resetSeconds: number): AppError => {
    window(req, 0, resetSeconds);
    return new AppError('rate_limited', 'Too many failed authentication attempts from this address.', undefined, resetSeconds);
  };
  // Every refusal counts against the client's address: a guessed key (401) and a leaked key used from elsewhere (403).
  const refused = async (req: Request, error: AppError): Promise<AppError> => {
    const counted = await failures.fail(clientAddress(req));
    if (!counted) return error; // Redis down: the refusal stands, uncounted
    if (counted.count > authFailLimit) return tooMany(req, counted.resetSeconds);
    window(req, authFailLimit - counted.count, counted.resetSeconds);
    return error;
  };
  const unauthorized = (req: Request, message: string) => refused(req, new AppError('unauthorized', message));

  return async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    try {
      const header = req.headers.authorization;
      if (!header) return next(await unauthorized(req, 'Missing API key: send Authorization: Bearer <key>.'));
      const key = BEARER.exec(header)?.[1];
      if (!key) return next(await unauthorized(req, malformedHeader(header)));
      if (!keyEnvironment(key)) return next(await unauthorized(req, MALFORMED_KEY));
      const hash = hashApiKey(key);
      const seen = cache.peek(hash);
      let auth: AuthContext | null;
      if (seen?.fresh) {
        auth = seen.auth;
      } else {
        // A key this process has seen valid (its entry expired) is read again from anywhere: guesses from a shared
        // address do not lock out its other clients. Anything else waits until the address has failures left.
        if (!seen) {
          const wait = await failures.blockedFor(clientAddress(req));
          if (wait) return next(tooMany(req, wait));
        }
        try {
          auth = await cache.load(hash);
        } catch {
          return next(AppError.unavailable('Authentication is temporarily unavailable.'));
        }
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
