import { createHash, createHmac, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { AppDeps, IdempotencyClaim } from '../context.js';
import { deleteRecord, insertRecord, readRecord, updateRecord, type DurableAnswer } from '../../shared/db/idempotency-records.js';

/** Where a request's logger comes from, read only when a line is written (a request's state builds it on first use). */
export type Logs = { readonly log: Logger };

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

export function newClaim(redisKey: string, scopeKey: Buffer, fp: string): IdempotencyClaim {
  return { redisKey, scopeKey, fingerprint: fp, token: randomUUID() };
}

/**
 * Keeps the in-flight lock alive while the request runs, so a slow request is never run a second time
 * by a retry that arrives after IDEMPOTENCY_LOCK_MS. A crashed process stops renewing and the lock expires.
 */
export function startRenewing(deps: AppDeps, claim: IdempotencyClaim, logs: Logs): void {
  const every = Math.max(50, Math.floor(deps.config.idempotencyLockMs / 3));
  claim.renewal = setInterval(() => {
    deps.scripts.renew(claim.redisKey, claim.token, deps.config.idempotencyLockMs).then(
      (ok) => ok === 0 && logs.log.error('lost the in-flight idempotency lock while the request was still running'),
      (err: unknown) => logs.log.warn({ err: (err as Error).message }, 'could not renew the in-flight idempotency lock'),
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

interface Settlement {
  claim: IdempotencyClaim;
  mode: 'store' | 'release';
  record: string;
  status: number;
  logs: Logs;
  /** Past this, a late store would be older than the retention period: it is dropped. */
  until: number;
}

const SETTLE_RETRY_MS = 250;
const MAX_UNSETTLED = 10_000;

/**
 * Answers whose idempotency record could not be settled because Redis stalled or dropped mid-request. The answer has
 * gone out (the write is committed), so the record is retried here until Redis takes it: a client retrying with the
 * same key then gets the replay, not a second run. Retried every SETTLE_RETRY_MS and at once when Redis reconnects.
 */
export class UnsettledRecords {
  private readonly pending = new Map<string, Settlement>();
  private timer: NodeJS.Timeout | null = null;
  private flushing = false;
  private readonly onReady = () => void this.flush();

  constructor(private readonly deps: Pick<AppDeps, 'scripts' | 'redis' | 'config'>) {
    deps.redis.on('ready', this.onReady);
  }

  get size(): number {
    return this.pending.size;
  }

  add(item: Settlement): void {
    if (this.pending.size >= MAX_UNSETTLED) {
      const [oldestKey, oldest] = this.pending.entries().next().value as [string, Settlement];
      this.pending.delete(oldestKey);
      oldest.logs.log.error({ status: oldest.status }, 'too many idempotent answers waiting for Redis; the oldest is no longer retried');
    }
    this.pending.set(item.claim.redisKey, item);
    this.timer ??= setInterval(() => void this.flush(), SETTLE_RETRY_MS).unref();
  }

  async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      for (const [key, item] of this.pending) {
        if (Date.now() > item.until) {
          this.pending.delete(key);
          continue;
        }
        const outcome = await settle(this.deps, item).catch(() => null);
        if (outcome === null) break; // Redis still unreachable: the next tick tries again
        this.pending.delete(key);
        if (outcome === -1) item.logs.log.error({ status: item.status }, 'idempotency key was claimed by another request before this answer could be recorded');
        else item.logs.log.warn({ status: item.status, mode: item.mode }, 'idempotent answer recorded after Redis came back');
      }
    } finally {
      this.flushing = false;
      if (this.pending.size === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = null;
      }
    }
  }

  /** Shutdown: one last try, then stop. */
  async close(): Promise<void> {
    this.deps.redis.off('ready', this.onReady);
    if (this.pending.size) await this.flush();
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

function settle(deps: Pick<AppDeps, 'scripts' | 'config'>, item: Settlement): Promise<number> {
  return deps.scripts.finish(item.claim.redisKey, item.claim.token, item.mode, item.record, deps.config.idempotencyCacheSeconds);
}

/**
 * 2xx and 4xx are cached for IDEMPOTENCY_CACHE_SECONDS (PostgreSQL keeps them for the retention period: recordDurably);
 * 5xx releases the key so the client may retry. `fp`: the fingerprint of the request that made the answer, when an
 * earlier request's record read back from PostgreSQL is cached.
 */
export async function finishIdempotency(
  deps: AppDeps, claim: IdempotencyClaim, status: number, body: string, requestId: string, logs: Logs, fp = claim.fingerprint,
): Promise<void> {
  const record: IdempotencyRecord = { s: 'd', fp, t: claim.token, st: status, b: body, rid: requestId };
  const item: Settlement = {
    claim, mode: status >= 500 ? 'release' : 'store', record: JSON.stringify(record), status, logs, until: Date.now() + deps.config.idempotencyCacheSeconds * 1000,
  };
  stopRenewing(claim);
  try {
    const outcome = await settle(deps, item);
    if (outcome === -1) logs.log.error({ status }, 'idempotency claim was taken over by another request before this one finished');
    if (outcome === 2) logs.log.warn({ status }, 'idempotency claim had vanished (Redis lost it); the answer is stored now');
  } catch (err) {
    logs.log.error({ err: (err as Error).message }, 'could not record the idempotent response; retrying until Redis answers');
    deps.unsettled.add(item);
  }
}

/**
 * What a request answers once its record is settled in PostgreSQL: its own answer (`ours`), the answer its unit of
 * work committed when the one at hand differs and cannot replace it (`committed`), or an earlier request's record
 * for the same key (`earlier`: Redis had forgotten it, so this request ran until PostgreSQL said so).
 */
export type DurableOutcome =
  | { kind: 'ours' }
  | { kind: 'committed'; status: number; body: string }
  | { kind: 'earlier'; answer: DurableAnswer };

/**
 * The durable half of settling (CONTRACT §3, "The record is durable"). An answer a unit of work committed with its
 * record (replyInUnit) is already stored; one that changed since (a quote priced while the request waited) updates
 * it (a 5xx withdraws it); any other 2xx or 4xx is stored on its own, unless an earlier request holds the key. A 5xx
 * stores nothing. PostgreSQL unreachable for an answer that wrote nothing: Redis keeps it; for an answer that cannot
 * replace the committed one, the committed one is sent.
 */
export async function recordDurably(deps: AppDeps, claim: IdempotencyClaim, status: number, body: string, requestId: string, logs: Logs): Promise<DurableOutcome> {
  const answer: DurableAnswer = { scopeKey: claim.scopeKey, fingerprint: claim.fingerprint, status, body, requestId };
  const committed = claim.recorded;
  if (committed) {
    if (committed.status === status && committed.body === body) return { kind: 'ours' };
    // A 5xx stores nothing (CONTRACT §3): the record is withdrawn and the key released, as for a quote whose pricing
    // failed after it was written (its own row says failed; a retry prices a new one).
    const changed = await (status < 500 ? updateRecord(deps.ds, answer) : deleteRecord(deps.ds, answer)).catch((err: unknown) => {
      logs.log.error({ err: (err as Error).message }, 'could not change the idempotency record');
      return false;
    });
    // A committed answer the awaited work may still replace is no answer to fall back on: the 5xx is sent, and a retry
    // with the key finds what the record holds then.
    if (changed || (status >= 500 && committed.replaceable)) return { kind: 'ours' };
    return { kind: 'committed', status: committed.status, body: committed.body };
  }
  if (status >= 500) return { kind: 'ours' };
  try {
    if (await insertRecord(deps.ds, answer)) return { kind: 'ours' };
    const earlier = await readRecord(deps.ds, claim.scopeKey);
    return earlier ? { kind: 'earlier', answer: earlier } : { kind: 'ours' };
  } catch (err) {
    logs.log.error({ err: (err as Error).message }, 'could not store the idempotent answer in PostgreSQL; Redis caches it');
    return { kind: 'ours' };
  }
}
