import type { AppError, ErrorCode } from '../shared/errors.js';

/** The HTTP status of each contract code: the only place a code meets HTTP. */
export const HTTP_STATUS: Record<ErrorCode, number> = {
  invalid_request: 400,
  idempotency_key_required: 400,
  invalid_idempotency_key: 400,
  unauthorized: 401,
  insufficient_scope: 403,
  ip_not_allowed: 403,
  live_not_enabled: 403,
  not_found: 404,
  idempotency_key_in_use: 409,
  quote_already_used: 409,
  invalid_state: 409,
  transaction_not_retryable: 409,
  insufficient_funds: 409,
  wallet_already_registered: 409,
  resource_archived: 409,
  transaction_not_refundable: 409,
  payload_too_large: 413,
  idempotency_key_reused: 422,
  quote_expired: 422,
  quote_not_available: 422,
  quote_direction_mismatch: 422,
  unsupported_corridor: 422,
  amount_out_of_range: 422,
  requirements_not_met: 422,
  invalid_signature: 422,
  challenge_expired: 422,
  wallet_not_verified: 422,
  invalid_batch: 422,
  rate_limited: 429,
  internal_error: 500,
  service_unavailable: 503,
};

/** Status and headers of an error's answer. */
export function httpAnswerOf(err: AppError): { status: number; headers: Record<string, string> } {
  return {
    status: HTTP_STATUS[err.code],
    headers: err.retryAfterSeconds !== undefined ? { 'Retry-After': String(Math.max(1, Math.ceil(err.retryAfterSeconds))) } : {},
  };
}
