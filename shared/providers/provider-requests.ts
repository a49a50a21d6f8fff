// Where live adapters record their requests (provider_requests): one row per (kind, our reference), written as
// `sending` before anything leaves, with the provider's latest answer in typed columns. What each write does is
// decided by shared/kernel/provider-records.ts and carried out here as a compare-and-set (PROVIDER_REQUEST_MACHINE).
import type { Logger } from 'pino';
import { AppError } from '../errors.js';
import { updateReturning } from '../db/unit-of-work.js';
import { moveRecord } from '../domain/transition.js';
import { PROVIDER_REQUEST_MACHINE, type ProviderRequestStatus } from '../domain/machines.js';
import type { CollectRequest, PayoutRequest, ProviderKind, ProviderOutcome, Queryable } from './provider.js';
import type { PayoutAnswer } from '../kernel/payout-answers.js';
import { answerOfOutcome } from '../kernel/payout-answers.js';
import { decideAnswer, decideSandboxRepeat, decideSend, outcomeColumns, outcomeOfRow, type AnswerFacts, type OutcomeRow, type RequestChange, type RequestSnapshot, type StoredOutcome } from '../kernel/provider-records.js';
import { decideRequestStep, type ProviderCapabilities, type RequestStep, type SendStep, type StoredRequest } from '../kernel/request-steps.js';
import { NOW } from '../kernel/plan.js';

export type { AnswerFacts, ProviderCapabilities, RequestStep, SendStep };
// The outcome's columns, for the sandbox's own record (the adapters read the kernel only through this keeper).
export { OUTCOME_FIELDS, outcomeColumns, outcomeOfRow, outcomeSet, type OutcomeRow } from '../kernel/provider-records.js';

/** A claimed request: the step the kernel decided, with what the adapter needs to carry it out. */
export interface ClaimedStep {
  step: RequestStep;
  /** Requests that left before this claim (leaveOrAnswer's `expectedSends`). */
  sends: number;
  /** The provider's (or our) name of the earlier request, if any. */
  providerReference: string | null;
}

/** A request's key: one row per (environment, kind, our reference). */
export interface RequestKey {
  environment: 'sandbox' | 'live';
  kind: ProviderKind;
  reference: string;
}

export type RequestRow = OutcomeRow & { id: string; sends: number; evaluations: number; answer: PayoutAnswer | null; conversation_id: string | null };

export const SNAPSHOT_COLUMNS = `id, ${outcomeColumns()}, sends, evaluations, answer, conversation_id`;

export function snapshotOf(row: RequestRow): RequestSnapshot {
  return { id: row.id, status: row.status, ended: row.ended, sends: row.sends, evaluations: row.evaluations, providerReference: row.provider_reference, answer: row.answer, conversationId: row.conversation_id };
}

/** The stored request by its key; locked (FOR UPDATE) when `lock`, in the caller's transaction. */
export async function requestRow(q: Queryable, key: RequestKey, lock = false): Promise<RequestRow | null> {
  const rows: RequestRow[] = await q.query(`SELECT ${SNAPSHOT_COLUMNS} FROM provider_requests WHERE environment = $1 AND kind = $2 AND reference = $3${lock ? ' FOR UPDATE' : ''}`,
    [key.environment, key.kind, key.reference]);
  return rows[0] ?? null;
}

/** Carries a decided change out as a compare-and-set; the row as written, or null when it moved on since it was read. */
export async function carryOut(q: Queryable, row: RequestRow, change: RequestChange): Promise<RequestRow | null> {
  if (change.kind === 'keep') return row;
  if (change.kind === 'move') {
    const { to, set } = change.move as { to: ProviderRequestStatus; set?: Record<string, unknown> };
    return moveRecord<ProviderRequestStatus, RequestRow>(q, PROVIDER_REQUEST_MACHINE, { id: row.id, expected: row.status, to, set, unchanged: change.unchanged });
  }
  // The status stays: only the columns beside it, while it is still the one read.
  const params: unknown[] = [row.id, row.status];
  const sets = Object.entries(change.set).map(([column, value]) => {
    if (!/^[a-z_]+$/.test(column) || column === PROVIDER_REQUEST_MACHINE.column) throw new Error(`bad column beside a provider request's status: ${column}`);
    if (value === NOW) return `${column} = now()`;
    params.push(value);
    return `${column} = $${params.length}`;
  });
  const rows = await updateReturning<RequestRow>(q, `UPDATE provider_requests SET ${sets.join(', ')} WHERE id = $1 AND status = $2 RETURNING *`, params);
  return rows[0] ?? null;
}

/**
 * Decides against the stored request and carries the decision out; decided again from a fresh read when the row moved
 * on between the read and the write (a callback, another worker). Locked rows (`lock`, in a transaction) never move
 * on. Answers the row as it stands and the decision, or null when the request was never recorded.
 */
export async function settleRequest(q: Queryable, key: RequestKey, decide: (r: RequestSnapshot) => RequestChange, lock = false): Promise<{ row: RequestRow; change: RequestChange } | null> {
  for (let tries = 0; tries < 10; tries++) {
    const read = await requestRow(q, key, lock);
    if (!read) return null;
    const change = decide(snapshotOf(read));
    const row = await carryOut(q, read, change);
    if (row) return { row, change };
  }
  throw new AppError('service_unavailable', `The ${key.kind} request ${key.reference} kept changing while its answer was recorded.`);
}

export class ProviderRequests {
  constructor(private readonly db: Queryable, private readonly log: Logger, private readonly provider: string) {}

  /** Writes the request as `sending` unless its reference exists; answers what was stored before (null: first time). */
  async claim(kind: ProviderKind, req: CollectRequest | PayoutRequest, request: Record<string, string>): Promise<(StoredOutcome & { sends: number; answer: PayoutAnswer | null }) | null> {
    if (req.scope.environment !== 'live') throw new AppError('internal_error', `${this.provider} only serves live requests.`);
    const rows = await updateReturning<RequestRow & { inserted: boolean }>(this.db,
      `INSERT INTO provider_requests AS p (business_id, environment, kind, reference, request, status)
       VALUES ($1, 'live', $2, $3, $4, 'sending')
       ON CONFLICT (environment, kind, reference) DO UPDATE SET attempts = p.attempts + 1, updated_at = now()
       WHERE p.business_id = EXCLUDED.business_id
       RETURNING ${outcomeColumns('p')}, p.sends, p.answer, (xmax = 0) AS inserted`,
      [req.scope.businessId, kind, req.reference, JSON.stringify(request)],
    );
    if (rows.length === 0) throw AppError.invalidState(`The ${kind} reference ${req.reference} belongs to another business.`);
    this.log.info({ provider: this.provider, kind, reference: req.reference, first: rows[0].inserted }, 'provider request');
    return rows[0].inserted ? null : { ...outcomeOfRow(rows[0]), sends: rows[0].sends, answer: rows[0].answer };
  }

  /**
   * Claims the request (claim) and answers the step the kernel decides for it (shared/kernel/request-steps.ts): the
   * stored answer, ask first, send, or wait. The adapter only carries the step out.
   */
  async claimStep(kind: ProviderKind, req: CollectRequest | PayoutRequest, request: Record<string, string>, provider: ProviderCapabilities): Promise<ClaimedStep> {
    const previous: StoredRequest | null = await this.claim(kind, req, request);
    const resendRefused = 'resendRefused' in req && req.resendRefused === true;
    return { step: decideRequestStep(kind, previous, { resendRefused, provider }), sends: previous?.sends ?? 0, providerReference: previous?.provider_reference ?? null };
  }

  /** A provider's word that is final for a payout once not pending (MTN's status GET, a refusal): stored with its answer. */
  storeWithAnswer(kind: ProviderKind, reference: string, outcome: ProviderOutcome): Promise<ProviderOutcome> {
    return this.store(kind, reference, outcome, kind === 'payout' ? { answer: answerOfOutcome(outcome.status) } : {});
  }

  /** What is stored for the request (its latest answer, or `sending`); null when we never claimed it. */
  async stored(kind: ProviderKind, reference: string): Promise<StoredOutcome | null> {
    return (await this.storedWithSends(kind, reference))?.outcome ?? null;
  }

  /** The stored answer and how many requests had left when it was read (a status query is about that one). */
  async storedWithSends(kind: ProviderKind, reference: string): Promise<{ outcome: StoredOutcome; sends: number } | null> {
    const row = await requestRow(this.db, { environment: 'live', kind, reference });
    return row && { outcome: outcomeOfRow(row), sends: row.sends };
  }

  /**
   * Keeps the provider's answer (with a final answer and the request's id when it gives them); a final outcome already
   * stored (a callback that came first) is never overwritten (kernel/provider-records.ts).
   */
  async store(kind: ProviderKind, reference: string, outcome: ProviderOutcome, facts: AnswerFacts = {}): Promise<ProviderOutcome> {
    const settled = await settleRequest(this.db, { environment: 'live', kind, reference }, (r) => decideAnswer(r, outcome, facts));
    this.log.info({ provider: this.provider, kind, reference, status: settled?.row.status }, 'provider answer');
    // A final answer is never `sending`: the stored row is an answer whenever it was kept or written.
    return settled ? (outcomeOfRow(settled.row) as ProviderOutcome) : outcome;
  }

  /**
   * The request leaves now (under `providerReference` when given, else the id it had): whatever was known of an earlier
   * one no longer describes it, so if this one goes unanswered the next attempt asks first (decideSend). `sends` counts
   * requests that left. MTN's request id is known before it leaves. `expectedSends`: only if no other worker sent it
   * since the caller read `sends` (false: it did, send nothing; or its final answer stands). `overRefusal`: a request
   * refused for good may go again (an on-ramp's fiat refund, decideSend).
   */
  async markSending(kind: ProviderKind, reference: string, providerReference?: string, expectedSends?: number, overRefusal = false): Promise<boolean> {
    const settled = await settleRequest(this.db, { environment: 'live', kind, reference }, (r) => decideSend(r, providerReference, expectedSends, overRefusal));
    return settled?.change.kind === 'move';
  }

  /**
   * markSending under the `sends` the caller's claim read: null when this caller's request may leave now; otherwise
   * what to answer instead, and nothing leaves: another worker's request went since (pending until its answer), or
   * the stored final answer stands. Two jobs of one payout at once never both send.
   */
  async leaveOrAnswer(kind: ProviderKind, reference: string, expectedSends: number, providerReference?: string, overRefusal = false): Promise<ProviderOutcome | null> {
    if (await this.markSending(kind, reference, providerReference, expectedSends, overRefusal)) return null;
    const stored = await this.stored(kind, reference);
    return stored && stored.status !== 'sending' ? (stored as ProviderOutcome) : { status: 'pending', provider_reference: stored?.provider_reference ?? null };
  }
}

/**
 * The sandbox's repeated request, decided on the row its upsert returned (decideSandboxRepeat) and carried out; read
 * again only when the row moved on before the write. Answers the row as it stands.
 */
export async function repeatSandbox(q: Queryable, key: RequestKey, read: RequestRow, evaluated: ProviderOutcome): Promise<RequestRow> {
  const change = decideSandboxRepeat(snapshotOf(read), evaluated);
  if (change.kind === 'keep') return read;
  return (await carryOut(q, read, change)) ?? (await settleRequest(q, key, (r) => decideSandboxRepeat(r, evaluated)))?.row ?? read;
}
