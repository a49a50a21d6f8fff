import type { NextFunction, Request, Response } from 'express';
import type { AppDeps } from '../context.js';
import { ApiError, errorEnvelope, isDependencyDown } from '../../shared/errors.js';
import { SealedRecordUnreadable } from '../../shared/crypto/envelope.js';
import { sendJson } from '../respond.js';
import { bodyError } from './body.js';

/** Every error path ends here and leaves as the envelope. A non-ApiError is a bug: logged, answered 500 without internals. */
export function errorHandler(deps: AppDeps) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction): void => {
    let apiError: ApiError;
    const status = (err as { status?: unknown } | null)?.status;
    if (err instanceof ApiError) apiError = err;
    // Errors Express or body-parser raise about the request itself (malformed JSON, bad percent-encoding).
    else if (typeof status === 'number' && status >= 400 && status < 500) apiError = bodyError(err);
    else if (err instanceof SealedRecordUnreadable) {
      // A row this deployment's ENCRYPTION_KEYS cannot open: configuration (or storage), not a bug in the request.
      req.state.log.error({ keyId: err.keyId, reason: err.reason }, 'a stored record does not open with ENCRYPTION_KEYS');
      apiError = ApiError.unavailable('This record cannot be read right now; the operator has been alerted.', 60);
    } else if (isDependencyDown(err)) {
      req.state.log.error({ err: (err as Error).message }, 'a dependency is unreachable');
      apiError = ApiError.unavailable('A service we depend on is unreachable; retry shortly.');
    } else {
      req.state.log.error({ err: err instanceof Error ? { message: err.message, stack: err.stack } : String(err) }, 'unhandled error');
      apiError = new ApiError(500, 'internal_error', 'Something went wrong on our side. It has been logged; retry later or contact support with the requestId.');
    }
    const body = errorEnvelope(apiError.code, apiError.message, req.state.id, apiError.details);
    sendJson(req, res, deps, apiError.status, body, apiError.headers).catch((sendErr: unknown) => {
      req.state.log.error({ err: String(sendErr) }, 'could not send error response');
    });
  };
}

export function notFoundRoute(_req: Request, _res: Response, next: NextFunction): void {
  next(new ApiError(404, 'not_found', 'No such route.'));
}
