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
  'challenge_expired', 'wallet_not_verified',
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

/** The error envelope: all four keys always present, `details: null` when there is nothing more to say. */
export function errorEnvelope(code: ErrorCode, message: string, requestId: string, details?: unknown) {
  return { error: { code, message, requestId, details: details ?? null } };
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
