import type { Logger } from 'pino';
import type { AppDeps, AuthContext } from '../context.js';
import type { Scope } from '../../shared/domain/api-keys.js';
import type { ErrorCode } from '../../shared/errors.js';
import type { Unit } from '../../shared/db/unit-of-work.js';
import type { RecordRef } from '../../shared/db/idempotency-records.js';
import type { RenderedRows } from '../rendered.js';

export type JsonSchema = Record<string, unknown>;

export interface ParamSpec {
  schema: JsonSchema;
  required?: boolean;
  description?: string;
  example?: unknown;
}

export interface ResponseSpec {
  description: string;
  schema?: JsonSchema;
  /** Also answered as `text/csv` (Accept: text/csv): what the CSV holds. */
  csv?: string;
}

export interface HandlerContext<B = any, Q = any, P = any> {
  deps: AppDeps;
  auth: AuthContext;
  body: B;
  query: Q;
  params: P;
  requestId: string;
  log: Logger;
  /**
   * Runs `work` in one unit of work whose result is the answer: the request's idempotency record is written in the
   * same transaction (CONTRACT §3, "The record is durable"). Every write's unit goes through it.
   */
  reply(work: (unit: Unit, record?: RecordRef) => Promise<Reply>): Promise<Reply>;
  /**
   * Stops waiting for the work that may replace the reply's answer (`replaceable`): answers what the request's record
   * holds from now on (api/respond.ts, closeAnswer), or undefined when it holds no replaceable answer. `closedHere`
   * false: another request (a replay) closed it first and was answered from it.
   */
  closeAnswer(): Promise<{ status: number; body: string; closedHere: boolean } | undefined>;
  /** The process's texts of one kind of row (`name`), each serialized by the component schema `schema` (api/rendered.ts). */
  rendered(name: string, schema: string): RenderedRows;
}

export interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  /** What a replay with the same Idempotency-Key answers, when it must differ: a secret is shown once, never stored in Redis. */
  replayBody?: unknown;
  /**
   * Written by reply()'s unit: the work it staged may replace this answer in the request's record while the request
   * waits for it (`record`, reply()'s second argument; a quote's pricing, recordReplace).
   */
  replaceable?: boolean;
  /** This answer's body, already in the request's idempotency record as these bytes (written by the work it waited for): sent as they are. */
  recorded?: string;
}

/**
 * A business endpoint: its OpenAPI operation and its handler, side by side, so that a route and its schema
 * change together. `path` is OpenAPI style and relative to /api/v1/business.
 */
export interface RouteDef {
  method: 'get' | 'post' | 'patch' | 'delete';
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  /**
   * What one request costs against the key's rate limit, from its (not yet validated) body; 1 when absent. A cost the
   * window has not left answers 429 before the handler runs (a payout batch costs its item count).
   */
  rateCost?: (body: unknown) => number;
  /** Required scope; null means any valid key. */
  scope: Scope | null;
  /** /sandbox/* controls: a live key gets 404. */
  sandboxOnly?: boolean;
  /** Moves real funds in live: a live key of a business not yet enabled for live gets 403 live_not_enabled. */
  requiresLiveEnabled?: boolean;
  pathParams?: Record<string, ParamSpec>;
  query?: Record<string, ParamSpec>;
  /** `examples`: named, valid request bodies; shown in the docs and used by the fuzz test as valid starting points. */
  body?: { schema: JsonSchema; required?: boolean; description?: string; examples?: Record<string, { summary: string; value: unknown }> };
  responses: Record<string, ResponseSpec>;
  /**
   * The business-rule codes its handler can raise (409, 422, ...). The pipeline's own codes (auth, scope, idempotency,
   * validation, not_found for ids, rate limit, outages) are derived from the fields above; see api/openapi/error-codes.ts.
   */
  errors?: ErrorCode[];
  handler: (ctx: HandlerContext) => Promise<Reply>;
  /**
   * `Accept: text/csv`: every row the filters match (CONTRACT 16), as RFC 4180 CSV with a header of `columns`,
   * streamed from `rows` (null and undefined are empty fields). `text` names the columns whose text a client (or a
   * provider) chose: those are written formula-safe (api/csv.ts); amounts and ids are written as they are.
   */
  csv?: { columns: readonly string[]; text: readonly string[]; rows: (ctx: HandlerContext) => AsyncIterable<Record<string, unknown>> };
}

export const BUSINESS_BASE = '/api/v1/business';

export function ref(name: string): JsonSchema {
  return { $ref: `#/components/schemas/${name}` };
}

export const uuidParam: ParamSpec = { schema: { type: 'string', format: 'uuid' }, required: true, description: 'Resource id (UUID).' };
