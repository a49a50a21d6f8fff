import { createHash } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import { planOnce } from './prepared-client.js';

/**
 * The durable half of idempotency (CONTRACT §3, "The record is durable"): one row per (business, environment,
 * Idempotency-Key), written in the transaction that creates or changes the resource (unit-of-work.ts), or on its own
 * for an answer that wrote nothing (a 4xx). Redis holds the in-flight lock and a short cache of the same record.
 */
export interface DurableAnswer {
  scopeKey: Buffer;
  fingerprint: string;
  status: number;
  /** The answer's body exactly as sent: a replay is byte-identical. */
  body: string;
  requestId: string;
  /**
   * The work this answer waits for may still replace it (POST /quotes' 202 `pending`, replaced by its pricing unit
   * with the priced 201 while the request waits: recordReplace). Whoever answers first closes it (closeRecord).
   */
  replaceable?: boolean;
}

/** Which request's record a job may answer (a quote's pricing job carries it): the record's key and the request. */
export interface RecordRef {
  /** scope_key, hex. */
  key: string;
  requestId: string;
}

export function recordRefOf(answer: Pick<DurableAnswer, 'scopeKey' | 'requestId'>): RecordRef {
  return { key: answer.scopeKey.toString('hex'), requestId: answer.requestId };
}

type Queryable = Pick<EntityManager, 'query'> | Pick<DataSource, 'query'>;

export const RECORD_KEY_CONSTRAINT = 'idempotency_records_pkey';

/** The record's key: the client's key is hashed with its scope, so its length and characters never shape ours. */
export function recordScopeKey(businessId: string, environment: string, key: string): Buffer {
  return createHash('sha256').update(`${businessId}\n${environment}\n${key}`).digest();
}

/** An earlier request already holds this key's record: the unit that met it was rolled back, nothing of it remains. */
export function isRecordConflict(err: unknown): boolean {
  const e = err as { code?: string; constraint?: string } | null;
  return e?.code === '23505' && e.constraint === RECORD_KEY_CONSTRAINT;
}

/** Columns and values of a record as one insert's SELECT list, from parameter $first on (null values: no row). */
export function recordInsert(first: number): string {
  const [k, f, s, b, r, x] = Array.from({ length: 6 }, (_, i) => `$${first + i}`);
  return `INSERT INTO idempotency_records (scope_key, fingerprint, status, body, request_id, replaceable)
       SELECT ${k}::bytea, ${f}::text, ${s}::smallint, ${b}::text, ${r}::text, ${x}::boolean WHERE ${k}::bytea IS NOT NULL`;
}

export function recordParams(answer: DurableAnswer | null | undefined): unknown[] {
  return answer ? [answer.scopeKey, answer.fingerprint, answer.status, answer.body, answer.requestId, answer.replaceable ?? false] : [null, null, null, null, null, null];
}

/** A job's answer to the request its record belongs to: the record's new status and body (recordReplace). */
export interface Replacement {
  ref: RecordRef;
  status: number;
  body: string;
  /** Set by the unit that wrote it: whether the record was replaced (false: closed or gone, the request answers itself). */
  replaced?: boolean;
}

/**
 * The work a request waited for replaces its answer, closing the record, only while it is still replaceable: a
 * request whose wait ran out closed it first (closeRecord) and sent what it held. Parameters numbered from `first`
 * (replacementParams); a null key replaces nothing. RETURNING 1: a row when the answer was replaced.
 */
export function recordReplace(first: number): string {
  const [k, r, s, b] = Array.from({ length: 4 }, (_, i) => `$${first + i}`);
  return `UPDATE idempotency_records SET status = ${s}::smallint, body = ${b}::text, replaceable = false
       WHERE scope_key = decode(${k}::text, 'hex') AND request_id = ${r}::text AND replaceable RETURNING 1`;
}

export function replacementParams(replacement: Replacement | null | undefined): unknown[] {
  return replacement ? [replacement.ref.key, replacement.ref.requestId, replacement.status, replacement.body] : [null, null, null, null];
}

/** On its own (an answer that wrote nothing): true when stored, false when an earlier request holds the key. */
export async function insertRecord(q: Queryable, answer: DurableAnswer): Promise<boolean> {
  const rows: unknown[] = await q.query(planOnce(`${recordInsert(1)} ON CONFLICT (scope_key) DO NOTHING RETURNING 1`), recordParams(answer));
  return rows.length > 0;
}

/** The answer changed after its unit committed it (a quote priced while the request waited): this request's row only. */
export async function updateRecord(q: Queryable, answer: DurableAnswer): Promise<boolean> {
  const result: [unknown[], number] = await q.query(
    planOnce(`UPDATE idempotency_records SET status = $3, body = $4, replaceable = false WHERE scope_key = $1 AND request_id = $5 AND fingerprint = $2`),
    recordParams(answer).slice(0, 5),
  );
  return result[1] > 0;
}

/**
 * Closes a replaceable record (its request's wait ran out, or a replay met it): the work it waited for can no longer
 * replace its answer, and what it holds now (the committed answer, or the work's if that came first) is the answer
 * from here on. `closedHere`: it was still replaceable, so no one else has been answered from it. Null when the
 * record is gone. A close that meets the work's uncommitted replacement waits for it (the row's lock).
 */
export async function closeRecord(
  q: Queryable, ref: Pick<DurableAnswer, 'scopeKey' | 'requestId'>,
): Promise<{ status: number; body: string; closedHere: boolean } | null> {
  const [rows]: [{ status: number; body: string; closed_here: boolean }[], number] = await q.query(
    planOnce(`UPDATE idempotency_records r SET replaceable = false
       FROM (SELECT scope_key, replaceable FROM idempotency_records WHERE scope_key = $1 AND request_id = $2 FOR UPDATE) was
      WHERE r.scope_key = was.scope_key RETURNING r.status, r.body, was.replaceable AS closed_here`),
    [ref.scopeKey, ref.requestId],
  );
  const row = rows[0];
  return row ? { status: row.status, body: row.body, closedHere: row.closed_here } : null;
}

/** A 5xx after the unit committed (a quote whose pricing failed): this request's record is withdrawn, the key released. */
export async function deleteRecord(q: Queryable, answer: Pick<DurableAnswer, 'scopeKey' | 'requestId'>): Promise<boolean> {
  const result: [unknown[], number] = await q.query(planOnce(`DELETE FROM idempotency_records WHERE scope_key = $1 AND request_id = $2`), [answer.scopeKey, answer.requestId]);
  return result[1] > 0;
}

/** `replaceable`: the request that wrote it still waits for the work that may replace its answer (it is in flight). */
export async function readRecord(q: Queryable, scopeKey: Buffer): Promise<DurableAnswer | null> {
  const rows: { fingerprint: string; status: number; body: string; request_id: string; replaceable: boolean }[] = await q.query(
    planOnce(`SELECT fingerprint, status, body, request_id, replaceable FROM idempotency_records WHERE scope_key = $1`),
    [scopeKey],
  );
  const row = rows[0];
  return row ? { scopeKey, fingerprint: row.fingerprint, status: row.status, body: row.body, requestId: row.request_id, replaceable: row.replaceable } : null;
}

/**
 * Deletes records older than `olderThanSeconds`, `batch` rows per statement (each its own short transaction, so no
 * long lock and no long-held snapshot), until none is left or `maxBatches` ran. Answers how many were deleted.
 */
export async function purgeRecords(ds: Pick<DataSource, 'query'>, olderThanSeconds: number, batch: number, maxBatches = 1_000): Promise<number> {
  let deleted = 0;
  for (let i = 0; i < maxBatches; i++) {
    const result: [unknown[], number] = await ds.query(
      `DELETE FROM idempotency_records WHERE scope_key IN (
         SELECT scope_key FROM idempotency_records WHERE created_at < now() - make_interval(secs => $1) ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [olderThanSeconds, batch],
    );
    deleted += result[1];
    if (result[1] < batch) break;
  }
  return deleted;
}
