import { isUtf8 } from 'node:buffer';
import express, { type NextFunction, type Request, type Response } from 'express';
import { AppError } from '../../shared/errors.js';

export const BODY_LIMIT = '1mb';
const parser = express.json({
  limit: BODY_LIMIT,
  strict: true,
  // The decoder would quietly turn invalid bytes into U+FFFD, storing something the client never sent.
  verify: (_req, _res, buf) => {
    if (!isUtf8(buf)) throw Object.assign(new Error('body is not UTF-8'), { status: 400, type: 'encoding.invalid' });
  },
});

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

// A UTF-16 half without its partner: JSON's \ud800 escapes allow it, PostgreSQL text cannot hold it (the driver would
// store U+FFFD, so two different references would become one) and jsonb refuses it outright.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function unstorable(text: string): boolean {
  return text.includes('\u0000') || LONE_SURROGATE.test(text);
}

/**
 * What JSON parsing accepts but nothing downstream should see: nesting deep enough to exhaust the stack, and text
 * PostgreSQL cannot store as sent (NUL, lone surrogates). Iterative, so the check itself cannot overflow.
 */
function shapeProblem(root: unknown, where: 'body' | 'query'): AppError | null {
  const stack: { value: unknown; depth: number }[] = [{ value: root, depth: 0 }];
  while (stack.length) {
    const { value, depth } = stack.pop()!;
    if (typeof value === 'string') {
      if (unstorable(value)) return AppError.invalid(`The ${where} contains a NUL character or an unpaired UTF-16 surrogate, which no field accepts.`);
    } else if (value && typeof value === 'object') {
      if (depth >= MAX_JSON_DEPTH) return AppError.invalid(`The ${where} nests deeper than ${MAX_JSON_DEPTH} levels.`);
      for (const [k, v] of Object.entries(value)) {
        if (unstorable(k)) return AppError.invalid(`The ${where} contains a NUL character or an unpaired UTF-16 surrogate, which no field accepts.`);
        stack.push({ value: v, depth: depth + 1 });
      }
    }
  }
  return null;
}

/** Query strings get the same text checks (their nesting is bounded by the query parser). */
export function rejectUnstorableText(query: unknown, where: 'query'): void {
  const problem = shapeProblem(query, where);
  if (problem) throw problem;
}

/** Turns a deferred body error into the envelope's error. */
export function bodyError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  const e = err as { type?: string; status?: number };
  if (e.type === 'entity.too.large' || e.status === 413) return new AppError('payload_too_large', 'Request body is larger than 1 MB.');
  if (e.type === 'entity.parse.failed') return AppError.invalid('Request body is not valid JSON.');
  if (e.type === 'charset.unsupported' || e.type === 'encoding.unsupported' || e.type === 'encoding.invalid') return AppError.invalid('Request body must be UTF-8 JSON.');
  if (err instanceof URIError) return AppError.invalid('The request path is not valid percent-encoding.');
  return AppError.invalid('The request could not be read.');
}
