import type { NextFunction, Request, Response } from 'express';
import type { AppDeps } from '../context.js';
import { ApiError } from '../../shared/errors.js';
import { sendJson } from '../respond.js';
import { bodyError } from './body.js';

/** Every error path ends here and leaves as the envelope. A non-ApiError is a bug: logged, answered 500 without internals. */
export function errorHandler(deps: AppDeps) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction): void => {
    let apiError: ApiError;
    if (err instanceof ApiError) apiError = err;
    else if (err && typeof err === 'object' && 'type' in err && typeof (err as { type: unknown }).type === 'string' && 'status' in err) apiError = bodyError(err);
    else {
      req.state.log.error({ err: err instanceof Error ? { message: err.message, stack: err.stack } : String(err) }, 'unhandled error');
      apiError = new ApiError(500, 'internal_error', 'Something went wrong on our side. It has been logged; retry later or contact support with the requestId.');
    }
    const body = { error: { code: apiError.code, message: apiError.message, requestId: req.state.id, ...(apiError.details !== undefined ? { details: apiError.details } : {}) } };
    sendJson(req, res, deps, apiError.status, body, apiError.headers).catch((sendErr: unknown) => {
      req.state.log.error({ err: String(sendErr) }, 'could not send error response');
    });
  };
}

export function notFoundRoute(_req: Request, _res: Response, next: NextFunction): void {
  next(new ApiError(404, 'not_found', 'No such route.'));
}
