import { createHash, createHmac, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { AppDeps, IdempotencyClaim } from '../context.js';

// Record kept under the key: in flight { s: 'f', fp, t } or done { s: 'd', fp, t, st, b, rid }.
export interface IdempotencyRecord {
  s: 'f' | 'd';
  fp: string;
  t: string;
  st?: number;
  b?: string;
  /** The request id of the answer stored: replays carry it in X-Request-Id. */
  rid?: string;
}

/** Sorted keys, so `{a,b}` and `{b,a}` are the same request. Bodies are depth-checked before they get here. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const keys = Object.keys(value as object).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** HMAC, not a bare hash: the body may hold beneficiary details, and a plain digest of a phone number can be guessed back. */
export function fingerprint(secret: Buffer, method: string, path: string, body: unknown): string {
  return createHmac('sha256', secret).update(`${method} ${path}\n${canonicalJson(body)}`).digest('base64url');
}

export function idempotencyRedisKey(prefix: string, businessId: string, environment: string, key: string): string {
  // The client's key is hashed so its length and characters never shape our key space.
  return `${prefix}:idem:${businessId}:${environment}:${createHash('sha256').update(key).digest('base64url')}`;
}

export function newClaim(redisKey: string, fp: string): IdempotencyClaim {
  return { redisKey, fingerprint: fp, token: randomUUID() };
}

/**
 * Keeps the in-flight lock alive while the request runs, so a slow request is never run a second time
 * by a retry that arrives after IDEMPOTENCY_LOCK_MS. A crashed process stops renewing and the lock expires.
 */
export function startRenewing(deps: AppDeps, claim: IdempotencyClaim, log: Logger): void {
  const every = Math.max(50, Math.floor(deps.config.idempotencyLockMs / 3));
  claim.renewal = setInterval(() => {
    deps.scripts.renew(claim.redisKey, claim.token, deps.config.idempotencyLockMs).then(
      (ok) => ok === 0 && log.error('lost the in-flight idempotency lock while the request was still running'),
      (err: unknown) => log.warn({ err: (err as Error).message }, 'could not renew the in-flight idempotency lock'),
    );
  }, every);
  claim.renewal.unref();
}

function stopRenewing(claim: IdempotencyClaim): void {
  if (claim.renewal) clearInterval(claim.renewal);
  claim.renewal = undefined;
}

export function inFlightRecord(claim: IdempotencyClaim): string {
  return JSON.stringify({ s: 'f', fp: claim.fingerprint, t: claim.token } satisfies IdempotencyRecord);
}

/** 2xx and 4xx are remembered for the retention period; 5xx releases the key so the client may retry. */
export async function finishIdempotency(deps: AppDeps, claim: IdempotencyClaim, status: number, body: string, requestId: string, log: Logger): Promise<void> {
  const release = status >= 500;
  const record: IdempotencyRecord = { s: 'd', fp: claim.fingerprint, t: claim.token, st: status, b: body, rid: requestId };
  stopRenewing(claim);
  try {
    const outcome = await deps.scripts.finish(claim.redisKey, claim.token, release ? 'release' : 'store', JSON.stringify(record), deps.config.idempotencyTtlSeconds);
    if (outcome === -1) log.error({ status }, 'idempotency claim was taken over by another request before this one finished');
    if (outcome === 2) log.warn({ status }, 'idempotency claim had vanished (Redis lost it); the answer is stored now');
  } catch (err) {
    // The in-flight marker expires on its own (IDEMPOTENCY_LOCK_MS); until then retries see 409.
    log.error({ err: (err as Error).message }, 'could not record the idempotent response');
  }
}
