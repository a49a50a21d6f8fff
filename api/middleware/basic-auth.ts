import { timingSafeEqual, createHash } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { FailedAuth, clientAddress } from './failed-auth.js';
import type { Scripts } from './redis-scripts.js';

/** Wrong operator credentials allowed per address per minute; the next attempt, right or wrong, is 429. */
const OPERATOR_FAIL_LIMIT = 10;
const OPERATOR_FAIL_WINDOW_SECONDS = 60;

function same(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/** The operators' failure counter, shared by the web process and every worker's metrics port. */
export function operatorFailures(scripts: Pick<Scripts, 'authFail' | 'authFailCount'>, redisPrefix: string): FailedAuth {
  return new FailedAuth(scripts, `${redisPrefix}:opfail`, OPERATOR_FAIL_LIMIT, OPERATOR_FAIL_WINDOW_SECONDS);
}

/**
 * HTTP basic auth for the operators' pages (Bull Board, /metrics); constant-time comparison. An address that has used
 * up its failures is answered 429 before its credentials are compared, so a right guess cannot be told apart then.
 */
export function basicAuth(user: string, password: string, failures: FailedAuth) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const ip = clientAddress(req);
    const wait = await failures.blockedFor(ip);
    if (wait) {
      res.setHeader('Retry-After', String(wait));
      res.status(429).type('text/plain').send(`Too many failed sign-ins from this address; retry in ${wait} s.`);
      return;
    }
    const header = req.headers.authorization ?? '';
    const match = /^Basic ([A-Za-z0-9+/=]+)$/.exec(header);
    if (match) {
      const decoded = Buffer.from(match[1], 'base64').toString('utf8');
      const sep = decoded.indexOf(':');
      if (sep >= 0 && same(decoded.slice(0, sep), user) && same(decoded.slice(sep + 1), password)) return next();
    }
    // A request without credentials is a browser asking for the prompt, not a guess: only wrong ones count.
    if (header) await failures.fail(ip);
    res.setHeader('WWW-Authenticate', 'Basic realm="Rampway operators", charset="UTF-8"');
    res.status(401).type('text/plain').send('Authentication required.');
  };
}
