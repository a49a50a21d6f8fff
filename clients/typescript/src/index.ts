// The Rampway client: openapi-fetch over the types openapi-typescript generates from the service's OpenAPI document
// (src/schema.d.ts; regenerate with `npm run client:generate` in the repository root, never by hand).
import createClient, { type Client, type Middleware } from 'openapi-fetch';
import type { components, paths } from './schema.js';

export type { components, paths } from './schema.js';
export type Schemas = components['schemas'];
export type RampwayClient = Client<paths>;

export interface ClientOptions {
  /** Where the service listens, e.g. `http://localhost:3000`. */
  baseUrl: string;
  /** `svc_test_...` (sandbox) or `svc_live_...` (live). A server-side secret: never ship it to a browser. */
  apiKey: string;
  fetch?: typeof globalThis.fetch;
}

/** A client whose every call carries the key; writes need an `Idempotency-Key` header, which `idempotencyKey()` makes. */
export function createRampwayClient(options: ClientOptions): RampwayClient {
  const client = createClient<paths>({ baseUrl: options.baseUrl, fetch: options.fetch });
  const auth: Middleware = {
    onRequest({ request }) {
      request.headers.set('Authorization', `Bearer ${options.apiKey}`);
      return request;
    },
  };
  client.use(auth);
  return client;
}

/** A fresh key for one logical write; keep it to retry that same write. */
export function idempotencyKey(prefix = 'rw'): string {
  return `${prefix}-${crypto.randomUUID()}`;
}

/** What `unwrap` throws for an answer that is not a success: the HTTP status and the API's error envelope. */
export interface RampwayError extends Error {
  status: number;
  /** The machine-readable code (`invalid_request`, `insufficient_scope`, `quote_expired`, ...). */
  code?: string;
  /** Equals the answer's X-Request-Id: quote it to support. */
  requestId?: string;
  /** For `invalid_request`, a list of `{ path, in, message }`; other codes say more or give null. */
  details?: unknown;
}

/** Throws the API's error envelope as a RampwayError (status, code, requestId and details kept) when a call did not succeed. */
export function unwrap<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.data !== undefined && result.response.ok) return result.data;
  const body = (result.error ?? {}) as { error?: { code?: string; message?: string; requestId?: string; details?: unknown } };
  const err = new Error(`${result.response.status} ${body.error?.code ?? 'error'}: ${body.error?.message ?? result.response.statusText}`) as RampwayError;
  Object.assign(err, { status: result.response.status, code: body.error?.code, requestId: body.error?.requestId, details: body.error?.details });
  throw err;
}

/** True for what `unwrap` throws. */
export function isRampwayError(err: unknown): err is RampwayError {
  return err instanceof Error && typeof (err as RampwayError).status === 'number';
}

/**
 * Every item of a list, page after page: `page(cursor)` reads one page (pass `cursor` as `starting_after`); the
 * next page is asked for only while `has_more` is true.
 */
export async function* paginate<T>(page: (startingAfter: string | undefined) => Promise<{ data: T[]; has_more: boolean; next_cursor: string | null }>): AsyncGenerator<T> {
  let cursor: string | undefined;
  for (;;) {
    const { data, has_more, next_cursor } = await page(cursor);
    yield* data;
    if (!has_more || !next_cursor) return;
    cursor = next_cursor;
  }
}
