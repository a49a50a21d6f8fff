import type { JsonSchema } from '../routes/route.js';
import { ERROR_CODES } from '../../shared/errors.js';

// Shared schemas. Resource files add their own through `schemas` registries imported in document.ts.
export const AMOUNT_PATTERN = '^(0|[1-9][0-9]*)(\\.[0-9]+)?$';

export const sharedSchemas: Record<string, JsonSchema> = {
  Uuid: { type: 'string', format: 'uuid' },
  Timestamp: { type: 'string', format: 'date-time', description: 'ISO 8601 UTC with milliseconds.' },
  DecimalAmount: {
    type: 'string',
    pattern: AMOUNT_PATTERN,
    maxLength: 40,
    description: 'A non-negative decimal amount as a string. Never a JSON number. At most the asset\'s or currency\'s scale of fractional digits.',
  },
  Chain: { type: 'string', enum: ['base', 'polygon', 'arbitrum', 'optimism', 'avalanche'] },
  Environment: { type: 'string', enum: ['sandbox', 'live'] },
  Error: {
    type: 'object',
    required: ['code', 'message', 'requestId', 'details'],
    properties: {
      code: { type: 'string', enum: [...ERROR_CODES], description: 'Machine-readable code. Each operation\'s responses list the codes it can answer, each with its own `details` (the `<Code>Error` schemas).' },
      message: { type: 'string', maxLength: 2000 },
      requestId: { type: 'string', format: 'uuid', maxLength: 36, description: 'Equals the X-Request-Id response header.' },
      details: {
        type: ['array', 'object', 'null'],
        maxItems: 20,
        items: {
          type: 'object',
          description: 'One issue: where (`path` within the request part `in`) and what is wrong.',
          properties: { path: { type: 'string', maxLength: 300 }, in: { type: 'string', maxLength: 300 }, message: { type: 'string', maxLength: 300 } },
        },
        description: 'Extra detail, `null` when there is nothing more to say. For `invalid_request` and `requirements_not_met`: a list of `{ path, in, message }` (at most 20 issues, each string at most 300 characters); for `insufficient_scope`: `{ required_scope }`. No error answer is larger than 16 KB.',
      },
    },
  },
  ErrorResponse: {
    type: 'object',
    required: ['error'],
    properties: { error: { $ref: '#/components/schemas/Error' } },
  },
  ListMeta: {
    type: 'object',
    required: ['has_more', 'next_cursor'],
    properties: {
      has_more: { type: 'boolean' },
      next_cursor: { type: ['string', 'null'], description: 'Pass as `starting_after` to read the next page.' },
    },
  },
};

export function listOf(itemSchemaName: string): JsonSchema {
  return {
    type: 'object',
    required: ['data', 'has_more', 'next_cursor'],
    properties: {
      data: { type: 'array', items: { $ref: `#/components/schemas/${itemSchemaName}` } },
      has_more: { type: 'boolean' },
      next_cursor: { type: ['string', 'null'] },
    },
  };
}

/** Query parameters every list endpoint takes. */
export const paginationQuery = {
  limit: { schema: { type: 'integer', minimum: 1, maximum: 100, default: 25 }, description: 'Page size, 1..100 (default 25).' },
  starting_after: { schema: { type: 'string', minLength: 1, maxLength: 200 }, description: 'Cursor from `next_cursor` of the previous page.' },
};
