import { buildDocument, type OpenApiDocument } from './document.js';
import { componentSerializer } from './serializers.js';
import { routes, schemas } from '../routes/index.js';

let document: OpenApiDocument | undefined;
const serializers = new Map<string, (value: unknown) => string>();

/**
 * An answer serialized outside the web process exactly as the web process serializes it: by the service's own
 * OpenAPI document's component schema (`Quote`), compiled once per process on first use. A quote's pricing unit writes
 * the priced answer into the idempotency record of the request that waits for it (price-quote.job.ts), and the
 * request sends those bytes. `check` (tests): compared with JSON.stringify's, as every answer is.
 */
export function serializeAnswer(schema: string, value: unknown, check: boolean): string {
  return answerSerializer(schema, check)(value);
}

/** The serializer serializeAnswer uses, compiled on first use: asking for it early compiles it outside a transaction. */
export function answerSerializer(schema: string, check: boolean): (value: unknown) => string {
  let serialize = serializers.get(schema);
  if (!serialize) serializers.set(schema, (serialize = componentSerializer((document ??= buildDocument(routes, schemas)), schema, check)));
  return serialize;
}

/** What POST /quotes answers with a priced quote. */
export const QUOTE_PRICED = 201;
