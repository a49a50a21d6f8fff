import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { AppDeps } from '../context.js';

/** Gives every request its own id (never the caller's), a child logger, and one log line when it ends. */
export function requestContext(deps: AppDeps) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const id = randomUUID();
    const log = deps.log.child({ requestId: id });
    req.state = { id, started: performance.now(), log };
    res.setHeader('X-Request-Id', id);
    res.on('finish', () => {
      const entry = {
        method: req.method,
        path: req.originalUrl.split('?')[0],
        status: res.statusCode,
        latencyMs: Math.round((performance.now() - req.state.started) * 100) / 100,
        businessId: req.state.auth?.businessId,
        environment: req.state.auth?.environment,
      };
      if (res.statusCode >= 500) log.error(entry, 'request failed');
      else log.info(entry, 'request');
    });
    next();
  };
}
