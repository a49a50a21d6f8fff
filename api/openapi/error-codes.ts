import { ERROR_CODES, MAX_DETAIL_CHARS, MAX_DETAIL_ITEMS, type ErrorCode } from '../../shared/errors.js';
import { HTTP_STATUS } from '../http-errors.js';
import type { JsonSchema, RouteDef } from '../routes/route.js';

/**
 * Which error codes an operation can answer. The pipeline's codes (authentication, scope, live enablement,
 * idempotency, validation, rate limit, outages) follow from the route's definition, so a new route gets them with no
 * list to update; the business rules its handler applies are the route's own `errors`. The error handler checks every
 * answer against this (see `noteUndeclared`), and the test run fails on any code an operation answered undeclared.
 */
export function errorCodesOf(route: RouteDef): ErrorCode[] {
  let codes = cache.get(route);
  if (codes) return codes;
  const mutating = route.method !== 'get';
  const found = new Set<ErrorCode>(['invalid_request', 'unauthorized', 'ip_not_allowed', 'rate_limited', 'internal_error', 'service_unavailable']);
  if (mutating) for (const c of ['idempotency_key_required', 'invalid_idempotency_key', 'idempotency_key_in_use', 'idempotency_key_reused', 'payload_too_large'] as const) found.add(c);
  if (route.scope) found.add('insufficient_scope');
  if (route.requiresLiveEnabled) found.add('live_not_enabled');
  // An {id} in the path, an id named in the body (customer_id, wallet_id, ...), or a sandbox control a live key calls.
  if (route.path.includes('{') || route.body || route.sandboxOnly) found.add('not_found');
  for (const c of route.errors ?? []) found.add(c);
  codes = ERROR_CODES.filter((c) => found.has(c));
  cache.set(route, codes);
  return codes;
}
const cache = new WeakMap<RouteDef, ErrorCode[]>();

/** Codes by the HTTP status that carries them, in status order. */
export function errorCodesByStatus(route: RouteDef): Map<number, ErrorCode[]> {
  const out = new Map<number, ErrorCode[]>();
  for (const code of errorCodesOf(route)) out.set(HTTP_STATUS[code], [...(out.get(HTTP_STATUS[code]) ?? []), code]);
  return new Map([...out].sort(([a], [b]) => a - b));
}

/** (operationId, code) pairs this process answered without the document declaring them; the test run asserts none. */
export const undeclaredErrors = new Set<string>();

/** Called on the error path only: a code the operation does not declare is logged and remembered. */
export function noteUndeclared(route: RouteDef, code: ErrorCode): boolean {
  if (errorCodesOf(route).includes(code)) return false;
  undeclaredErrors.add(`${route.operationId}: ${code}`);
  return true;
}

/** `snake_case` -> `SnakeCase`. */
export const pascal = (name: string): string => name.split('_').map((w) => w[0]!.toUpperCase() + w.slice(1)).join('');

/** `invalid_request` -> `InvalidRequestError`: the component schema of one code's error object. */
export function errorSchemaName(code: ErrorCode): string {
  return `${pascal(code)}Error`;
}

const ISSUE_LIST: JsonSchema = {
  type: 'array',
  maxItems: MAX_DETAIL_ITEMS,
  items: {
    type: 'object',
    required: ['path', 'message'],
    properties: {
      path: { type: 'string', maxLength: MAX_DETAIL_CHARS, description: 'The field, dotted (`details.phone_number`), or `(body)` / `(query)`; a longer one is cut, ending in `…`.' },
      in: { type: 'string', enum: ['body', 'query', 'path', 'header'] },
      message: { type: 'string', maxLength: MAX_DETAIL_CHARS, description: 'A longer one (a list of allowed values) is cut, ending in `…`.' },
    },
  },
};
const ID = { type: 'string', format: 'uuid', maxLength: 36 };
const TEXT = { type: 'string', maxLength: 200 };
const OBJECT_OR_NULL = (description: string, properties: Record<string, JsonSchema> = {}): JsonSchema => ({ type: ['object', 'null'], description, properties });

/** What `details` holds, per code (the guide's error table says when each code happens). */
const DETAILS: Partial<Record<ErrorCode, JsonSchema>> = {
  invalid_request: { oneOf: [ISSUE_LIST, { type: 'null' }], description: 'The fields that failed (the first 20), when the request parsed; else `null`.' },
  requirements_not_met: { ...ISSUE_LIST, description: 'The beneficiary or payer fields that fail the corridor\'s requirements (the first 20).' },
  insufficient_scope: { type: 'object', required: ['required_scope'], properties: { required_scope: TEXT } },
  not_found: OBJECT_OR_NULL('`param` names the request field whose id was not found; `null` for the path\'s own id.', { param: TEXT }),
  wallet_already_registered: { type: 'object', required: ['wallet_id'], properties: { wallet_id: ID } },
  quote_already_used: { type: 'object', required: ['quote_id'], properties: { quote_id: ID, transaction_id: { ...ID, description: 'The transaction this quote started (it is yours): retrieve it rather than starting another.' } } },
  quote_expired: { type: 'object', required: ['quote_id'], properties: { quote_id: ID, expires_at: { type: 'string', format: 'date-time', maxLength: 40 } } },
  quote_not_available: { type: 'object', required: ['quote_id'], properties: { quote_id: ID, status: TEXT } },
  quote_direction_mismatch: { type: 'object', required: ['quote_id', 'direction'], properties: { quote_id: ID, direction: { type: 'string', enum: ['offramp', 'onramp'] } } },
  unsupported_corridor: OBJECT_OR_NULL('`reason` when the pair exists but not for this request: `beneficiary_mismatch`, `direction_not_supported`, `collection_not_supported`, `no_live_provider`; else the currency and the payment methods it supports in the `direction` asked. The message names `GET /corridors`, which lists them all.', {
    reason: TEXT, currency: TEXT, payment_method: TEXT, direction: { type: 'string', enum: ['offramp', 'onramp'] },
    supported_payment_methods: { type: 'array', maxItems: 10, items: TEXT }, supported_directions: { type: 'array', maxItems: 2, items: { type: 'string', enum: ['offramp', 'onramp'] } },
  }),
  amount_out_of_range: OBJECT_OR_NULL('The corridor\'s bounds, in its fiat currency, where they apply.', { min_amount: TEXT, max_amount: TEXT, currency: TEXT, max_usdc: TEXT }),
  invalid_signature: { type: 'object', required: ['challenge_id'], properties: { challenge_id: ID } },
  challenge_expired: { type: 'object', required: ['challenge_id'], properties: { challenge_id: ID } },
  wallet_not_verified: { type: 'object', required: ['wallet_id'], properties: { wallet_id: ID } },
  invalid_batch: {
    type: 'array',
    maxItems: MAX_DETAIL_ITEMS,
    description: 'One entry per bad item, in item order (the first 20): its 0-based `index` in `items`, the `code` the same fault answers for a single payout, and why.',
    items: {
      type: 'object',
      required: ['index', 'code', 'message'],
      properties: { index: { type: 'integer', minimum: 0 }, code: { type: 'string', maxLength: MAX_DETAIL_CHARS }, message: { type: 'string', maxLength: MAX_DETAIL_CHARS } },
    },
  },
  resource_archived: OBJECT_OR_NULL('The archived resource\'s id (`wallet_id`, `beneficiary_id`, `customer_id`).'),
  invalid_state: OBJECT_OR_NULL('The resource\'s current `status` and related ids, when they help.', { status: TEXT }),
  transaction_not_retryable: OBJECT_OR_NULL('The transaction\'s `status` and funding; `reason` when it is refunded rather than retried (`underpaid`, `late_deposit`).', { status: TEXT, reason: TEXT }),
  insufficient_funds: { type: 'object', required: ['available', 'required'], properties: { available: TEXT, required: TEXT }, description: 'USDC the treasury has available, and what was asked for.' },
  transaction_not_refundable: {
    type: 'object',
    required: ['reason', 'status'],
    properties: {
      reason: {
        type: 'string',
        enum: ['nothing_to_refund', 'not_refundable_status', 'payout_outcome_unknown', 'onramp'],
        description: '`nothing_to_refund`: holds no USDC neither paid out nor returned; `not_refundable_status`: not `action_required` or `failed`; ' +
          '`payout_outcome_unknown`: a payout request has no final answer yet (it may have paid; ask again later); `onramp`: on-ramps return fiat only through the provider.',
      },
      status: TEXT,
    },
  },
};

/** One component schema per code: `code` a constant, `details` typed for that code (`null` where it says nothing). */
export function errorCodeSchemas(): Record<string, JsonSchema> {
  return Object.fromEntries(ERROR_CODES.map((code) => [errorSchemaName(code), {
    type: 'object',
    required: ['code', 'message', 'requestId', 'details'],
    properties: {
      code: { type: 'string', const: code },
      message: { type: 'string', maxLength: 2000, description: 'For people: may change; never parse it.' },
      requestId: { type: 'string', format: 'uuid', maxLength: 36, description: 'Equals the X-Request-Id response header.' },
      details: DETAILS[code] ?? { type: 'null' },
    },
  }]));
}
