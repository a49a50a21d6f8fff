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
  const [k, f, s, b, r] = Array.from({ length: 5 }, (_, i) => `$${first + i}`);
  return `INSERT INTO idempotency_records (scope_key, fingerprint, status, body, request_id)
       SELECT ${k}::bytea, ${f}::text, ${s}::smallint, ${b}::text, ${r}::text WHERE ${k}::bytea IS NOT NULL`;
}

export function recordParams(answer: DurableAnswer | null | undefined): unknown[] {
  return answer ? [answer.scopeKey, answer.fingerprint, answer.status, answer.body, answer.requestId] : [null, null, null, null, null];
}

/** On its own (an answer that wrote nothing): true when stored, false when an earlier request holds the key. */
export async function insertRecord(q: Queryable, answer: DurableAnswer): Promise<boolean> {
  const rows: unknown[] = await q.query(planOnce(`${recordInsert(1)} ON CONFLICT (scope_key) DO NOTHING RETURNING 1`), recordParams(answer));
  return rows.length > 0;
}

/** The answer changed after its unit committed it (a quote priced while the request waited): this request's row only. */
export async function updateRecord(q: Queryable, answer: DurableAnswer): Promise<boolean> {
  const result: [unknown[], number] = await q.query(
    planOnce(`UPDATE idempotency_records SET status = $3, body = $4 WHERE scope_key = $1 AND request_id = $5 AND fingerprint = $2`),
    recordParams(answer),
  );
  return result[1] > 0;
}

/** A 5xx after the unit committed (a quote whose pricing failed): this request's record is withdrawn, the key released. */
export async function deleteRecord(q: Queryable, answer: Pick<DurableAnswer, 'scopeKey' | 'requestId'>): Promise<boolean> {
  const result: [unknown[], number] = await q.query(planOnce(`DELETE FROM idempotency_records WHERE scope_key = $1 AND request_id = $2`), [answer.scopeKey, answer.requestId]);
  return result[1] > 0;
}

export async function readRecord(q: Queryable, scopeKey: Buffer): Promise<DurableAnswer | null> {
  const rows: { fingerprint: string; status: number; body: string; request_id: string }[] = await q.query(
    planOnce(`SELECT fingerprint, status, body, request_id FROM idempotency_records WHERE scope_key = $1`),
    [scopeKey],
  );
  const row = rows[0];
  return row ? { scopeKey, fingerprint: row.fingerprint, status: row.status, body: row.body, requestId: row.request_id } : null;
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
