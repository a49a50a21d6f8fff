import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import type { AppDeps, RequestState } from '../context.js';
import { httpDuration } from '../../shared/metrics.js';
import { BUSINESS_BASE } from '../routes/route.js';
import { maskCallbackPath } from '../provider-callbacks.js';

type Timer = ReturnType<typeof httpDuration.labels>;
const timers = new Map<string, Timer>();

/** The duration histogram's series for these labels, found once (prom-client hashes its labels on every observe). */
function durationOf(method: string, route: string, status: number): Timer {
  const key = `${method} ${status} ${route}`;
  let timer = timers.get(key);
  if (!timer) timers.set(key, (timer = httpDuration.labels(method, route, String(status))));
  return timer;
}

/** Gives every request its own id (never the caller's), a child logger, and one access-log line when it ends. */
export function requestContext(deps: AppDeps) {
  // The access line's fields are fixed and safe (no headers, no bodies), so it skips the redaction pass that
  // every other log call gets: per request, that pass cost as much as the rest of the logging.
  const access = deps.log.child({}, { redact: { paths: [] } });
  return (req: Request, res: Response, next: NextFunction): void => {
    const id = randomUUID();
    let log: Logger | undefined;
    const state: RequestState = {
      id,
      started: performance.now(),
      // Built on first use: most requests never log anything but their access line.
      get log() {
        log ??= deps.log.child({ requestId: id });
        return log;
      },
    };
    req.state = state;
    res.setHeader('X-Request-Id', id);
    const entry = () => ({
      requestId: id,
      method: req.method,
      // A provider callback's path carries its secret token.
      path: maskCallbackPath(req.originalUrl.split('?')[0]),
      status: res.statusCode,
      latencyMs: Math.round((performance.now() - state.started) * 100) / 100,
      businessId: state.auth?.businessId,
      environment: state.auth?.environment,
      transactionId: state.transactionId,
    });
    // One listener: 'close' follows 'finish' when the answer was sent, and comes alone when it was not (the client, or
    // a router's timeout, gave up first): then it is still one line, so the request is never invisible.
    res.once('close', () => {
      if (!res.writableFinished) {
        access.warn({ ...entry(), aborted: true }, 'request aborted before the answer was sent');
        return;
      }
      if (res.statusCode >= 500) access.error(entry(), 'request failed');
      else access.info(entry(), 'request');
      // The metric's one cost per request. Labelled by route template; an unknown path is one series, not one per path.
      const route = state.route ? BUSINESS_BASE + state.route.path : ((req.route as { path?: string } | undefined)?.path ?? 'unmatched');
      durationOf(req.method, route, res.statusCode).observe((performance.now() - state.started) / 1000);
    });
    next();
  };
}
