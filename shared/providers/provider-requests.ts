// Where live adapters record their requests (provider_requests): one row per (kind, our reference), written as
// `sending` before anything leaves, with the provider's latest answer. A final answer is never overwritten.
import type { Logger } from 'pino';
import { AppError } from '../errors.js';
import { updateReturning } from '../db/unit-of-work.js';
import type { CollectRequest, PayoutRequest, ProviderKind, ProviderOutcome, Queryable } from './provider.js';
import type { PayoutAnswer } from '../kernel/payout-answers.js';

/** What a request's answer teaches beyond its outcome: a final answer, and the provider's id of the request. */
export interface AnswerFacts {
  answer?: PayoutAnswer | null;
  conversationId?: string | null;
}

export class ProviderRequests {
  constructor(private readonly db: Queryable, private readonly log: Logger, private readonly provider: string) {}

  /** Writes the request as `sending` unless its reference exists; answers what was stored before (null: first time). */
  async claim<T extends { status: string; provider_reference: string | null }>(kind: ProviderKind, req: CollectRequest | PayoutRequest, request: Record<string, string>): Promise<(T & { sends: number; answer: PayoutAnswer | null }) | null> {
    if (req.scope.environment !== 'live') throw new AppError('internal_error', `${this.provider} only serves live requests.`);
    const rows = await updateReturning<{ outcome: T; sends: number; answer: PayoutAnswer | null; inserted: boolean }>(this.db,
      `INSERT INTO provider_requests AS p (business_id, environment, kind, reference, request, outcome)
       VALUES ($1, 'live', $2, $3, $4, '{"status":"sending","provider_reference":null}')
       ON CONFLICT (environment, kind, reference) DO UPDATE SET attempts = p.attempts + 1, updated_at = now()
       WHERE p.business_id = EXCLUDED.business_id
       RETURNING p.outcome, p.sends, p.answer, (xmax = 0) AS inserted`,
      [req.scope.businessId, kind, req.reference, JSON.stringify(request)],
    );
    if (rows.length === 0) throw AppError.invalidState(`The ${kind} reference ${req.reference} belongs to another business.`);
    this.log.info({ provider: this.provider, kind, reference: req.reference, first: rows[0].inserted }, 'provider request');
    return rows[0].inserted ? null : { ...rows[0].outcome, sends: rows[0].sends, answer: rows[0].answer };
  }

  /** What is stored for the request (its latest answer, or `sending`); null when we never claimed it. */
  async stored<T = ProviderOutcome>(kind: ProviderKind, reference: string): Promise<T | null> {
    const rows: { outcome: T }[] = await this.db.query(`SELECT outcome FROM provider_requests WHERE environment = 'live' AND kind = $1 AND reference = $2`, [kind, reference]);
    return rows[0]?.outcome ?? null;
  }

  /**
   * Keeps the provider's answer (with a final answer and the request's id when it gives them); a final outcome already
   * stored (a callback that came first) is never overwritten.
   */
  async store(kind: ProviderKind, reference: string, outcome: ProviderOutcome, facts: AnswerFacts = {}): Promise<ProviderOutcome> {
    const rows = await updateReturning<{ outcome: ProviderOutcome }>(this.db,
      `UPDATE provider_requests SET outcome = CASE WHEN outcome->>'status' IN ('succeeded', 'declined', 'rejected') THEN outcome ELSE $3::jsonb END,
              answer = CASE WHEN outcome->>'status' IN ('succeeded', 'declined', 'rejected') THEN answer ELSE coalesce($4, answer) END,
              conversation_id = CASE WHEN outcome->>'status' IN ('succeeded', 'declined', 'rejected') THEN conversation_id ELSE coalesce($5, conversation_id) END,
              updated_at = now()
        WHERE environment = 'live' AND kind = $1 AND reference = $2 RETURNING outcome`,
      [kind, reference, JSON.stringify(outcome), facts.answer ?? null, facts.conversationId ?? null],
    );
    this.log.info({ provider: this.provider, kind, reference, status: rows[0]?.outcome.status }, 'provider answer');
    return rows[0]?.outcome ?? outcome;
  }

  /**
   * The request leaves now (under `providerReference` when given, else the id it had): whatever was known of an earlier
   * one (its answer, its id, the status queries about it, a claim) no longer describes it, so if this one goes
   * unanswered the next attempt asks first. `sends` counts requests that left. A final answer is kept, unless the
   * provider said the request ended without moving money (`ended`). MTN's request id is known before it leaves.
   * `expectedSends`: only if no other worker sent it since the caller read `sends` (false: it did, send nothing).
   */
  async markSending(kind: ProviderKind, reference: string, providerReference?: string, expectedSends?: number): Promise<boolean> {
    const rows = await updateReturning(this.db,
      `UPDATE provider_requests SET outcome = jsonb_build_object('status', 'sending', 'provider_reference', COALESCE(to_jsonb($3::text), outcome->'provider_reference')),
              answer = NULL, conversation_id = $3, status_queries = '{}', claimed = NULL, sends = sends + 1, updated_at = now()
        WHERE environment = 'live' AND kind = $1 AND reference = $2 AND (outcome->>'status' NOT IN ('succeeded', 'declined', 'rejected') OR outcome->>'ended' = 'true')
          AND ($4::int IS NULL OR sends = $4) RETURNING sends`,
      [kind, reference, providerReference ?? null, expectedSends ?? null],
    );
    return rows.length > 0;
  }
}
