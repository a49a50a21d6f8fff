export const ERROR_CODES = [
  'invalid_request', 'idempotency_key_required', 'invalid_idempotency_key',
  'unauthorized',
  'insufficient_scope', 'ip_not_allowed', 'live_not_enabled',
  'not_found',
  'idempotency_key_in_use', 'quote_already_used', 'invalid_state', 'transaction_not_retryable', 'insufficient_funds',
  'wallet_already_registered', 'resource_archived', 'transaction_not_refundable',
  'payload_too_large',
  'idempotency_key_reused', 'quote_expired', 'quote_not_available', 'quote_direction_mismatch',
  'unsupported_corridor', 'amount_out_of_range', 'requirements_not_met', 'invalid_signature',
  'challenge_expired', 'wallet_not_verified', 'invalid_batch',
  'rate_limited',
  'internal_error',
  'service_unavailable',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * The one error type, raised by domain code, middleware and routes alike. It names a contract code and knows no
 * HTTP: the web process maps the code to a status (api/http-errors.ts), the worker runtime to retry or give up.
 * Its message is shown to the caller: never put secrets in it.
 */
export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
    /** When retrying can help (a dependency down, a key in use): seconds to wait. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'AppError';
  }

  static invalid(message: string, details?: unknown): AppError {
    return new AppError('invalid_request', message, details);
  }

  static notFound(resource: string): AppError {
    return new AppError('not_found', `No such ${resource}.`);
  }

  static invalidState(message: string, details?: unknown): AppError {
    return new AppError('invalid_state', message, details);
  }

  static unavailable(message: string, retryAfterSeconds = 5): AppError {
    return new AppError('service_unavailable', message, undefined, retryAfterSeconds);
  }
}

/** At most this many `details` items; the list simply stops there. */
export const MAX_DETAIL_ITEMS = 20;
/** At most this many characters in each string of a `details` item (its message, its path). */
export const MAX_DETAIL_CHARS = 300;
/** No error answer is larger than this, whatever the request. */
export const MAX_ERROR_BYTES = 16 * 1024;
/** The message: ours, but it may quote a field name the request chose. */
const MAX_MESSAGE_CHARS = 1_000;

/** At most `max` characters, the last one an ellipsis when cut; never half a surrogate pair. */
function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max - 1;
  if (/[\uD800-\uDBFF]/.test(text[end - 1])) end -= 1;
  return `${text.slice(0, end)}…`;
}

/** Each string of an item (or of an object's values) clipped; anything else as it is. */
function clipStrings(value: unknown): unknown {
  if (typeof value === 'string') return clip(value, MAX_DETAIL_CHARS);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, typeof v === 'string' ? clip(v, MAX_DETAIL_CHARS) : v]));
}

/**
 * The error envelope: all four keys always present, `details: null` when there is nothing more to say. Bounded
 * whatever the request: 20 items of 300-character strings, and items dropped from the end (a non-list: dropped) while
 * the answer is over 16 KB (strings of escaped control characters take six bytes each).
 */
export function errorEnvelope(code: ErrorCode, message: string, requestId: string, details?: unknown) {
  let bounded: unknown = Array.isArray(details) ? details.slice(0, MAX_DETAIL_ITEMS).map(clipStrings) : clipStrings(details ?? null);
  const envelope = { error: { code, message: clip(message, MAX_MESSAGE_CHARS), requestId, details: bounded } };
  while (bounded !== null && Buffer.byteLength(JSON.stringify(envelope)) > MAX_ERROR_BYTES) {
    bounded = Array.isArray(bounded) && bounded.length > 1 ? bounded.slice(0, -1) : null;
    envelope.error.details = bounded;
  }
  return envelope;
}

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', '57P01', '57P02', '57P03', '53300']);
const CONNECTION_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection is closed|Stream isn't writeable|Command timed out|the database system is (starting up|shutting down)/i;

/** PostgreSQL or Redis unreachable (refused, dropped, stalled): an outage to wait out, not a bug or a bad request. */
export function isDependencyDown(err: unknown): boolean {
  for (let e = err as { code?: string; message?: string; driverError?: unknown } | undefined, i = 0; e && i < 3; e = e.driverError as typeof e, i++) {
    if (e.code && (CONNECTION_CODES.has(e.code) || e.code.startsWith('08'))) return true;
    if (e.message && CONNECTION_MESSAGES.test(e.message)) return true;
  }
  return false;
}

/** A job failure that retrying cannot fix: the processor has recorded the outcome; BullMQ must not retry. */
export { UnrecoverableError as PermanentJobError } from 'bullmq';
