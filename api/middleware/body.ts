import express, { type NextFunction, type Request, type Response } from 'express';
import { ApiError } from '../../shared/errors.js';

export const BODY_LIMIT = '1mb';
const parser = express.json({ limit: BODY_LIMIT, strict: true });

/**
 * Parses JSON bodies but defers a parse failure: the rate limit and idempotency gate still run,
 * so even a 400 or 413 carries the rate-limit headers and is remembered under its Idempotency-Key.
 */
export function parseBody() {
  return (req: Request, res: Response, next: NextFunction): void => {
    parser(req, res, (err?: unknown) => {
      if (err) req.state.bodyError = err;
      next();
    });
  };
}

/** Turns a deferred body error into the envelope's error. */
export function bodyError(err: unknown): ApiError {
  const e = err as { type?: string; status?: number };
  if (e.type === 'entity.too.large' || e.status === 413) return new ApiError(413, 'payload_too_large', 'Request body is larger than 1 MB.');
  if (e.type === 'entity.parse.failed') return ApiError.invalid('Request body is not valid JSON.');
  if (e.type === 'charset.unsupported' || e.type === 'encoding.unsupported') return ApiError.invalid('Request body must be UTF-8 JSON.');
  return ApiError.invalid('Request body could not be read.');
}
