import type { ErrorCode } from '../../shared/errors.js';

const INT32_MAX = 2_147_483_647;
const int = (minimum: number, maximum = INT32_MAX) => ({ type: 'integer', format: 'int32', minimum, maximum });

/** Response headers, declared once and referenced by every response that carries them. */
export const HEADERS: Record<string, object> = {
  'X-Request-Id': {
    description: 'This request\'s id; equals `error.requestId` on errors. A replay carries the id of the request whose answer it repeats.',
    schema: { type: 'string', format: 'uuid', maxLength: 36 },
  },
  'X-RateLimit-Limit': {
    description: 'Requests allowed per window for this API key. On 401 and 403 `ip_not_allowed`: failed authentications allowed per window from this address.',
    schema: int(1),
  },
  'X-RateLimit-Remaining': { description: 'Requests left in this window.', schema: int(0) },
  'X-RateLimit-Reset': { description: 'Whole seconds until the window resets (at least 1).', schema: int(1, 86_400) },
  'Retry-After': { description: 'Whole seconds to wait before retrying (at least 1).', schema: int(1, 86_400) },
  'Idempotent-Replayed': {
    description: '`true` when this is the stored answer of an earlier request with the same Idempotency-Key.',
    schema: { type: 'string', enum: ['true'] },
  },
};

const ref = (name: string) => ({ $ref: `#/components/headers/${name}` });
const RATE = { 'X-RateLimit-Limit': ref('X-RateLimit-Limit'), 'X-RateLimit-Remaining': ref('X-RateLimit-Remaining'), 'X-RateLimit-Reset': ref('X-RateLimit-Reset') };

export function successHeaders(mutating: boolean): Record<string, object> {
  return { 'X-Request-Id': ref('X-Request-Id'), ...RATE, ...(mutating ? { 'Idempotent-Replayed': ref('Idempotent-Replayed') } : {}) };
}

/** Rate headers whenever the limiter answered (absent while Redis is unreachable); Retry-After where waiting helps. */
export function errorHeaders(status: number): Record<string, object> {
  return { 'X-Request-Id': ref('X-Request-Id'), ...RATE, ...([409, 429, 503].includes(status) ? { 'Retry-After': ref('Retry-After') } : {}) };
}

export const STATUS_TEXT: Record<number, string> = {
  400: 'Bad request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not found', 409: 'Conflict', 413: 'Payload too large',
  422: 'Unprocessable', 429: 'Rate limited', 500: 'Internal error', 503: 'Unavailable',
};

/** Statuses every operation answers with the same codes: one shared response each (an operation uses it when its codes match). */
export const SHARED_ERROR_RESPONSES: Record<string, { name: string; codes: ErrorCode[]; when: string }> = {
  401: { name: 'Unauthorized', codes: ['unauthorized'], when: 'Missing, malformed, unknown or revoked API key.' },
  413: { name: 'PayloadTooLarge', codes: ['payload_too_large'], when: 'The request body is over 1 MB.' },
  429: { name: 'RateLimited', codes: ['rate_limited'], when: 'Over the key\'s rate limit, or too many failed authentications from this address; wait `Retry-After` seconds.' },
  500: { name: 'InternalError', codes: ['internal_error'], when: 'A bug on our side; it never carries internals. Quote the requestId to support.' },
  503: { name: 'Unavailable', codes: ['service_unavailable'], when: 'A dependency is down, or a live rail is not configured yet; retry after `Retry-After` seconds (writes with the same Idempotency-Key).' },
};
