import { timingSafeEqual, createHash } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

function same(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/** HTTP basic auth for the operators' pages (Bull Board, /metrics); constant-time comparison. */
export function basicAuth(user: string, password: string) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const header = req.headers.authorization ?? '';
    const match = /^Basic ([A-Za-z0-9+/=]+)$/.exec(header);
    if (match) {
      const decoded = Buffer.from(match[1], 'base64').toString('utf8');
      const sep = decoded.indexOf(':');
      if (sep >= 0 && same(decoded.slice(0, sep), user) && same(decoded.slice(sep + 1), password)) return next();
    }
    res.setHeader('WWW-Authenticate', 'Basic realm="Rampway operators", charset="UTF-8"');
    res.status(401).type('text/plain').send('Authentication required.');
  };
}
