import type { Serialize } from './openapi/serializers.js';
import type { RouteDef } from './routes/route.js';
import type { DataSource } from 'typeorm';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from '../shared/config.js';
import type { Queues } from '../shared/queues/producer.js';
import type { Environment } from '../shared/domain/chains.js';
import type { Scope } from '../shared/domain/api-keys.js';
import type { PlatformFee } from '../shared/domain/pricing.js';
import type { Scripts } from './middleware/redis-scripts.js';
import type { AppError } from '../shared/errors.js';
import type { UnsettledRecords } from './middleware/idempotency-store.js';
import type { JobWaiters } from './job-waiters.js';

/** What the web process is built from; tests build their own. */
export interface AppDeps {
  config: Config;
  ds: DataSource;
  redis: Redis;
  /** Lua scripts installed on `redis`. */
  scripts: Scripts;
  /** The fail-fast connection the producer queues share. */
  producerRedis: Redis;
  queues: Queues;
  log: Logger;
  /** Idempotent answers whose record Redis could not take when they were sent; retried until it does. */
  unsettled: UnsettledRecords;
  /** Requests that wait briefly for a pricing job they started. */
  pricingWaiters: JobWaiters;
}

export interface AuthContext {
  keyId: string;
  keyPrefix: string;
  businessId: string;
  businessName: string;
  businessStatus: string;
  liveEnabled: boolean;
  businessCreatedAt: Date;
  businessUpdatedAt: Date;
  /** The business's platform fee (admin set-fees), cached with the key. */
  platformFee: PlatformFee;
  environment: Environment;
  scopes: ReadonlySet<Scope>;
  allowedIps: readonly string[];
  rateLimit: number;
  rateWindowSeconds: number;
}

export interface IdempotencyClaim {
  redisKey: string;
  /** The record's key in PostgreSQL (idempotency_records). */
  scopeKey: Buffer;
  fingerprint: string;
  token: string;
  /**
   * The answer this request's unit of work committed as its record (replyInUnit), if one did. `replaceable`: the work
   * it waits for may still replace it in PostgreSQL (a quote's pricing), until the request closes it (closeAnswer).
   */
  recorded?: { status: number; body: string; replaceable?: boolean };
  /** The object `recorded.body` was serialized from: an answer sending that same object sends those bytes. */
  recordedFrom?: unknown;
  /** Renews the in-flight lock while the request runs. */
  renewal?: NodeJS.Timeout;
}

export interface RequestState {
  id: string;
  started: number;
  readonly log: Logger;
  auth?: AuthContext;
  idempotency?: IdempotencyClaim;
  bodyError?: unknown;
  /** Decided by the route's access checks (scope, sandbox-only); the gate counts the request but claims nothing. */
  refusal?: AppError;
  /** The matched operation, set by its access check; unset for unknown routes (which never touch idempotency). */
  route?: RouteDef;
  /** The transaction this request is about (its path id, or the one it created): on its log lines. */
  transactionId?: string;
  /** The matched operation's answers, serialized from its OpenAPI response schemas (api/openapi/serializers.ts). */
  serialize?: Serialize;
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      state: RequestState;
    }
  }
}
