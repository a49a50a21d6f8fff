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
    if (req.method === 'GET' || req.method === 'HEAD') return next(); // no body to read on the hot path
    parser(req, res, (err?: unknown) => {
      if (err) req.state.bodyError = err;
      else if (req.body !== undefined) {
        const problem = shapeProblem(req.body, 'body');
        if (problem) req.state.bodyError = problem;
      }
      next();
    });
  };
}

export const MAX_JSON_DEPTH = 32;

/**
 * What JSON parsing accepts but nothing downstream should see: nesting deep enough to exhaust the stack,
 * and NUL characters, which PostgreSQL text cannot hold. Iterative, so the check itself cannot overflow.
 */
function shapeProblem(root: unknown, where: 'body' | 'query'): ApiError | null {
  const stack: { value: unknown; depth: number }[] = [{ value: root, depth: 0 }];
  while (stack.length) {
    const { value, depth } = stack.pop()!;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) return ApiError.invalid(`The ${where} contains a NUL character, which no field accepts.`);
    } else if (value && typeof value === 'object') {
      if (depth >= MAX_JSON_DEPTH) return ApiError.invalid(`The ${where} nests deeper than ${MAX_JSON_DEPTH} levels.`);
      for (const [k, v] of Object.entries(value)) {
        if (k.includes('\u0000')) return ApiError.invalid(`The ${where} contains a NUL character, which no field accepts.`);
        stack.push({ value: v, depth: depth + 1 });
      }
    }
  }
  return null;
}

/** Query strings get the same NUL check (their nesting is bounded by the query parser). */
export function rejectNul(query: unknown, where: 'query'): void {
  const problem = shapeProblem(query, where);
  if (problem) throw problem;
}

/** Turns a deferred body error into the envelope's error. */
export function bodyError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as { type?: string; status?: number };
  if (e.type === 'entity.too.large' || e.status === 413) return new ApiError(413, 'payload_too_large', 'Request body is larger than 1 MB.');
  if (e.type === 'entity.parse.failed') return ApiError.invalid('Request body is not valid JSON.');
  if (e.type === 'charset.unsupported' || e.type === 'encoding.unsupported') return ApiError.invalid('Request body must be UTF-8 JSON.');
  if (err instanceof URIError) return ApiError.invalid('The request path is not valid percent-encoding.');
  return ApiError.invalid('The request could not be read.');
}
