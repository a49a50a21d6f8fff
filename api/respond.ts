import type { Request, Response } from 'express';
import type { AppDeps, IdempotencyClaim, RequestState } from './context.js';
import type { Reply } from './routes/route.js';
import { finishIdempotency, recordDurably } from './middleware/idempotency-store.js';
import { inUnit, type Unit } from '../shared/db/unit-of-work.js';
import { closeRecord, readRecord, recordRefOf, type DurableAnswer, type RecordRef } from '../shared/db/idempotency-records.js';
import { AppError, errorEnvelope } from '../shared/errors.js';
import { httpAnswerOf } from './http-errors.js';
import { renderedBytes } from './rendered.js';

/**
 * The one way a business answer leaves the service: serialize once, settle the idempotency record (stored for
 * 2xx/4xx in PostgreSQL and cached in Redis, released for 5xx) before the bytes go out, then send.
 */
export async function sendJson(
  req: Request, res: Response, deps: AppDeps, status: number, body: unknown, headers: Record<string, string> = {},
  /** What a replay of this answer shows, when it must differ from the answer itself (a secret is shown once). */
  replayBody: unknown = body,
): Promise<void> {
  const claim = req.state.idempotency;
  const serialize = req.state.serialize;
  // The unit of work serialized the replay body for its record: the same object is not serialized again.
  if (!claim) {
    // A read whose answer was rendered beforehand (api/rendered.ts): its bytes go out as they are.
    const bytes = renderedBytes(serialize, status, body);
    if (bytes) return sendHeadersAndPayload(req, res, status, headers, bytes);
  }
  const serialized = (value: unknown) => (claim?.recorded && claim.recordedFrom === value
    ? claim.recorded.body
    : renderedBytes(serialize, status, value)?.toString() ?? (serialize ? serialize(status, value) : JSON.stringify(value)));
  let payload = serialized(body);
  if (claim) {
    req.state.idempotency = undefined;
    let stored = replayBody === body ? payload : serialized(replayBody);
    const outcome = await recordDurably(deps, claim, status, stored, req.state.id, req.state);
    if (outcome.kind === 'earlier') return answerEarlier(req, res, deps, claim, outcome.answer);
    if (outcome.kind === 'committed') {
      // The answer its unit committed stands: what a replay will show is what this request shows.
      ({ status, body: stored } = outcome);
      payload = stored;
      headers = {};
    }
    await finishIdempotency(deps, claim, status, stored, req.state.id, req.state);
  }
  sendHeadersAndPayload(req, res, status, headers, payload);
}

function sendHeadersAndPayload(req: Request, res: Response, status: number, headers: Record<string, string>, payload: string | Buffer): void {
  if (res.headersSent) return;
  for (const name in headers) res.setHeader(name, headers[name]);
  sendPayload(req, res, status, payload);
}

/**
 * A serialized JSON answer, written as Express's `send` would write it here (no ETag, no 204 among our answers),
 * without its per-request work on headers we already know.
 */
export function sendPayload(req: Request, res: Response, status: number, payload: string | Buffer): void {
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length);
  if (req.method === 'HEAD') res.end();
  else res.end(payload);
}

/**
 * Runs `work` in one unit of work whose result is the request's answer: the idempotency record (the reply as a replay
 * shows it) is written in the same transaction as the resource, in the unit's last statement. An earlier request that
 * holds the key (Redis had forgotten it) fails the unit, which leaves nothing; the error handler answers its record.
 */
export async function replyInUnit(deps: AppDeps, state: RequestState, work: (unit: Unit, record?: RecordRef) => Promise<Reply>): Promise<Reply> {
  const claim = state.idempotency;
  // A second unit in one request leaves the record to the first (sendJson updates it if the answer changed).
  if (!claim || claim.recorded) return inUnit(deps, (unit) => work(unit));
  let recorded: { status: number; body: string } | undefined;
  let from: unknown;
  const ref = recordRefOf({ scopeKey: claim.scopeKey, requestId: state.id });
  const reply = await inUnit(deps, (unit) => work(unit, ref), {
    answer: (r) => {
      if (r.status >= 500) return null;
      from = 'replayBody' in r ? r.replayBody : r.body;
      recorded = { status: r.status, body: state.serialize ? state.serialize(r.status, from) : JSON.stringify(from) };
      return { scopeKey: claim.scopeKey, fingerprint: claim.fingerprint, requestId: state.id, ...recorded, replaceable: r.replaceable };
    },
  });
  claim.recorded = recorded && { ...recorded, replaceable: !!reply.replaceable };
  claim.recordedFrom = from;
  return reply;
}

/**
 * The request stops waiting for the work that may replace its answer (a quote's pricing): its record is closed, so
 * nothing replaces it any more, and what it holds now is the request's answer from here on (the work's, if that came
 * first). `closedHere` false: someone else closed it first (a replay answered from it), so it must be sent as it is.
 * Undefined when the request holds no replaceable record (nothing to close, or it is gone). PostgreSQL out of reach:
 * 503 (the record is withdrawn if it can be; a retry with the key closes it and replays what it holds then).
 */
export async function closeAnswer(deps: AppDeps, state: RequestState): Promise<{ status: number; body: string; closedHere: boolean } | undefined> {
  const claim = state.idempotency;
  const committed = claim?.recorded;
  if (!claim || !committed?.replaceable) return undefined;
  const held = await closeRecord(deps.ds, { scopeKey: claim.scopeKey, requestId: state.id }).catch((err: unknown) => {
    state.log.error({ err: (err as Error).message }, 'could not close the idempotency record the request waited on');
    throw AppError.unavailable('Writes are temporarily unavailable; retry with the same Idempotency-Key.');
  });
  if (!held) {
    claim.recorded = undefined;
    return undefined;
  }
  if (held.status !== committed.status || held.body !== committed.body) claim.recordedFrom = undefined;
  claim.recorded = { status: held.status, body: held.body };
  return held;
}

/**
 * The handler's answer is already in the request's record as `body` (the work it waited for wrote it there, or it was
 * read back when the record was closed): those bytes are sent, and the record is not written again.
 */
export function answeredAs(state: RequestState, status: number, body: string, from: unknown): void {
  const claim = state.idempotency;
  if (!claim) return;
  claim.recorded = { status, body };
  claim.recordedFrom = from;
}

/**
 * The unit of work met the key's record (isRecordConflict): an earlier request with this key holds it, and Redis had
 * forgotten it. Answers that record, or 500 when it cannot be read (nothing was written; the client may retry).
 */
export async function answerRecorded(req: Request, res: Response, deps: AppDeps): Promise<boolean> {
  const claim = req.state.idempotency;
  if (!claim) return false;
  let earlier = await readRecord(deps.ds, claim.scopeKey).catch(() => null);
  if (!earlier) return false;
  if (earlier.replaceable && earlier.fingerprint === claim.fingerprint) {
    // Its request waited for the work that may replace its answer (or never came back): closed here, what it holds
    // now is the answer from here on, for that request and for this replay alike.
    const held = await closeRecord(deps.ds, earlier).catch(() => null);
    if (!held) return false;
    earlier = { ...earlier, status: held.status, body: held.body, replaceable: false };
  }
  req.state.idempotency = undefined;
  await answerEarlier(req, res, deps, claim, earlier);
  return true;
}

/**
 * An earlier request's record, read from PostgreSQL: cached in Redis again under this request's claim, then replayed
 * byte for byte, or 422 when this is another request under its key.
 */
async function answerEarlier(req: Request, res: Response, deps: AppDeps, claim: IdempotencyClaim, earlier: DurableAnswer): Promise<void> {
  await finishIdempotency(deps, claim, earlier.status, earlier.body, earlier.requestId, req.state, earlier.fingerprint);
  if (res.headersSent) return;
  if (earlier.fingerprint !== claim.fingerprint) {
    const err = new AppError('idempotency_key_reused', 'This Idempotency-Key was already used with a different request.');
    const { status } = httpAnswerOf(err);
    sendPayload(req, res, status, JSON.stringify(errorEnvelope(err.code, err.message, req.state.id, err.details)));
    return;
  }
  req.state.log.info({ replayOf: earlier.requestId }, 'idempotent replay (from PostgreSQL)');
  res.setHeader('X-Request-Id', earlier.requestId);
  res.setHeader('Idempotent-Replayed', 'true');
  sendPayload(req, res, earlier.status, earlier.body);
}
