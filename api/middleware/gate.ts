import type { NextFunction, Request, Response } from 'express';
import type { AppDeps } from '../context.js';
import { AppError } from '../../shared/errors.js';
import { leaseSize, RateLeases, type LeaseHeaders } from './rate-leases.js';
import { sendPayload } from '../respond.js';
import { recordScopeKey } from '../../shared/db/idempotency-records.js';
import { canonicalJson, fingerprint, idempotencyRedisKey, startRenewing, inFlightRecord, newClaim, type IdempotencyRecord } from './idempotency-store.js';

const MUTATING = new Set(['POST', 'PATCH', 'DELETE']);
// Printable ASCII: header bytes arrive as latin1, so anything else would be measured and matched by its bytes, not its characters.
const KEY_SHAPE = /^[\x20-\x7e]{8,255}$/;
const REDIS_DOWN_LOG_INTERVAL_MS = 60_000;

/**
 * Rate limit and idempotency in at most one Redis round trip (one Lua script): none for a read this process holds a
 * leased request for (rate-leases.ts). Runs after authentication and the route's access checks. A request already
 * refused (scope, sandbox-only) or without a usable Idempotency-Key is still counted, but never claims or replays an
 * idempotency record.
 */
export function gate(deps: AppDeps) {
  let lastRedisDownLog = 0;
  const leases = new RateLeases();

  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const auth = req.state.auth!;
    const route = req.state.route;
    // Idempotency belongs to operations: an unknown route is counted and answered 404, whatever its method.
    const mutating = MUTATING.has(req.method) && route !== undefined;
    const rawKey = req.headers['idempotency-key'];
    let keyProblem: AppError | null = null;
    if (mutating) {
      if (rawKey === undefined || rawKey === '') keyProblem = new AppError('idempotency_key_required', 'This request needs an Idempotency-Key header.');
      // Node joins repeated headers with ", ": two keys must not pass as a third.
      else if ((req.headersDistinct['idempotency-key']?.length ?? 0) > 1) keyProblem = new AppError('invalid_idempotency_key', 'Send exactly one Idempotency-Key header.');
      else if (typeof rawKey !== 'string' || !KEY_SHAPE.test(rawKey)) keyProblem = new AppError('invalid_idempotency_key', 'Idempotency-Key must be 8 to 255 printable ASCII characters.');
    }
    const refusal = req.state.refusal ?? keyProblem;
    const claim = mutating && !refusal
      ? newClaim(
          idempotencyRedisKey(deps.config.redisPrefix, auth.businessId, auth.environment, rawKey as string),
          recordScopeKey(auth.businessId, auth.environment, rawKey as string),
          fingerprint(
            deps.config.idempotencySecret,
            req.method,
            // The operation and its path parameters, not the raw URL: `/customers/` and `/customers` are one request.
            `${route!.operationId} ${canonicalJson(req.params)}`,
            req.state.bodyError ? { malformed: req.headers['content-length'] ?? '' } : (req.body ?? null),
          ),
        )
      : null;
    const counterKey = `${deps.config.redisPrefix}:rl:${auth.keyId}`;
    const limit = auth.rateLimit;
    // A request that claims nothing (a read, or one refused before its claim) is answered from a lease when this
    // process holds one (rate-leases.ts): no Redis round trip.
    let leased = claim ? null : leases.take(counterKey, limit);
    if (!claim && !leased) {
      const pending = leases.pending(counterKey);
      if (pending) {
        await pending;
        leased = leases.take(counterKey, limit);
      }
    }
    if (leased) {
      setRateHeaders(res, limit, leased);
      return next(refusal ?? undefined);
    }
    // What this write costs (a payout batch: its items); only a single request uses one this process already had counted.
    const cost = claim && route?.rateCost ? Math.max(1, Math.floor(route.rateCost(req.body))) : 1;
    const held = claim !== null && cost === 1 && leases.take(counterKey, limit) !== null;
    let result;
    try {
      const asked = deps.scripts.gate(
        claim ? [counterKey, claim.redisKey] : [counterKey],
        limit,
        auth.rateWindowSeconds * 1000,
        claim ? inFlightRecord(claim) : '',
        deps.config.idempotencyLockMs,
        claim ? (held ? 0 : cost) : leaseSize(limit),
        cost > 1,
      );
      if (!claim) leases.asking(counterKey, asked);
      result = await asked;
    } catch (err) {
      if (Date.now() - lastRedisDownLog > REDIS_DOWN_LOG_INTERVAL_MS) {
        lastRedisDownLog = Date.now();
        req.state.log.error({ err: (err as Error).message }, 'redis unreachable: reads proceed without rate limiting, writes are refused');
      }
      // A refusal needs no Redis and still stands (a missing scope must never read through an outage). Only an
      // operation's write needs the idempotency Redis cannot give now; an unknown route is still a 404.
      if (refusal) return next(refusal);
      if (mutating) return next(AppError.unavailable('Writes are temporarily unavailable; retry with the same Idempotency-Key.'));
      return next();
    }
    const [count, pttl, verdict, existing, counted] = result;
    // This request used one of those counted now (a write's cost: all of them), or the one it held (counted 0); one
    // held from an ended window is void, and Redis counted it anew.
    const headers = leases.record(counterKey, limit, { count, pttl, counted, used: counted > 0 ? (claim ? counted : 1) : 0 });
    setRateHeaders(res, limit, headers);
    if (verdict === 'limited') {
      const message = cost > 1
        ? `This request costs ${cost} requests (one per item) and the rate limit of ${auth.rateLimit} per ${auth.rateWindowSeconds} s has ${Math.max(0, limit - count + 1)} left in this window.`
        : `Rate limit of ${auth.rateLimit} requests per ${auth.rateWindowSeconds} s exceeded.`;
      return next(new AppError('rate_limited', message, undefined, headers.resetSeconds));
    }
    if (refusal) return next(refusal);
    if (verdict === 'existing' && claim) {
      const record = JSON.parse(existing!) as IdempotencyRecord;
      if (record.fp !== claim.fingerprint) {
        return next(new AppError('idempotency_key_reused', 'This Idempotency-Key was already used with a different request.'));
      }
      if (record.s === 'f') {
        return next(new AppError('idempotency_key_in_use', 'A request with this Idempotency-Key is still in progress.', undefined, 1));
      }
      // The replay is the first answer, byte for byte: it keeps that request's id, which its body may quote.
      req.state.log.info({ replayOf: record.rid }, 'idempotent replay');
      if (record.rid) res.setHeader('X-Request-Id', record.rid);
      res.setHeader('Idempotent-Replayed', 'true');
      sendPayload(req, res, record.st!, record.b!);
      return;
    }
    if (claim) {
      req.state.idempotency = claim;
      // Renewed until the answer is settled (every path, errors included, ends in sendJson).
      startRenewing(deps, claim, req.state);
    }
    next();
  };
}

function setRateHeaders(res: Response, limit: number, headers: LeaseHeaders): void {
  res.setHeader('X-RateLimit-Limit', String(limit));
  res.setHeader('X-RateLimit-Remaining', String(headers.remaining));
  res.setHeader('X-RateLimit-Reset', String(headers.resetSeconds));
}
