// A provider request (provider_requests) as a machine with a typed outcome: what an answer, a new send, a status
// answer or a late success does to the stored request, decided here and carried out as compare-and-sets
// (PROVIDER_REQUEST_MACHINE, moveRecord). Pure: no I/O. The columns hold what the adapters' port returns (a
// ProviderOutcome): its status, the provider's id, the receipt, the failure, and whether the request ended unpaid.
import { PROVIDER_REQUEST_MACHINE, type ProviderRequestStatus } from '../domain/machines.js';
import type { ProviderFailure, ProviderOutcome } from '../providers/provider.js';
import type { PayoutAnswer } from './payout-answers.js';
import { NOW, type Move } from './plan.js';

/** The columns an answer sets beside the status (outcomeSet's keys). */
export const OUTCOME_FIELDS = ['provider_reference', 'receipt', 'failure', 'ended'] as const;

/** The outcome's columns, for every SELECT that reads a request's outcome (qualified by `alias` when given). */
export function outcomeColumns(alias?: string): string {
  return ['status', ...OUTCOME_FIELDS].map((c) => (alias ? `${alias}.${c}` : c)).join(', ');
}

/** What the outcome columns hold. */
export interface OutcomeRow {
  status: ProviderRequestStatus;
  provider_reference: string | null;
  receipt: string | null;
  failure: ProviderFailure | null;
  ended: boolean;
}

/** The request's stored outcome as the port's shape: `sending` while a request is out and unanswered. */
export type StoredOutcome = ProviderOutcome | { status: 'sending'; provider_reference: string | null };

export function outcomeOfRow(row: OutcomeRow): StoredOutcome {
  if (row.status === 'sending') return { status: 'sending', provider_reference: row.provider_reference };
  return {
    status: row.status, provider_reference: row.provider_reference,
    ...(row.receipt !== null ? { receipt: row.receipt } : {}), ...(row.failure ? { failure: row.failure } : {}), ...(row.ended ? { ended: true } : {}),
  };
}

/** The columns an answer sets (all of them: an answer replaces the one before whole). */
export function outcomeSet(outcome: ProviderOutcome): Record<(typeof OUTCOME_FIELDS)[number], unknown> {
  return { provider_reference: outcome.provider_reference ?? null, receipt: outcome.receipt ?? null, failure: outcome.failure ?? null, ended: outcome.ended === true };
}

/** Succeeded, declined and rejected are the provider's last word about the request. */
export function isFinalStatus(status: string): boolean {
  return status === 'succeeded' || status === 'declined' || status === 'rejected';
}

/** The stored request, as the decisions read it. */
export interface RequestSnapshot {
  id: string;
  status: ProviderRequestStatus;
  ended: boolean;
  sends: number;
  /** The sandbox's evaluations of the request (how often it decided what the request did). */
  evaluations: number;
  providerReference: string | null;
  answer: PayoutAnswer | null;
  conversationId: string | null;
}

export type RequestChange =
  /** A status move, a compare-and-set from the status read and the other columns it read (`unchanged`). */
  | { kind: 'move'; move: Move; unchanged: Record<string, unknown> }
  /** Columns beside the status only (the status stays, as read). */
  | { kind: 'fields'; set: Record<string, unknown> }
  | { kind: 'keep'; reason: string };

function move(r: RequestSnapshot, to: ProviderRequestStatus, set: Record<string, unknown>, unchanged: Record<string, unknown> = {}): RequestChange {
  return { kind: 'move', move: { machine: PROVIDER_REQUEST_MACHINE, id: r.id, from: r.status, to, set: { ...set, updated_at: NOW } }, unchanged };
}

/** What an answer teaches beyond its outcome: a final answer about the latest request, and the provider's id of it. */
export interface AnswerFacts {
  answer?: PayoutAnswer | null;
  conversationId?: string | null;
}

/**
 * The provider's answer to the request (its reply, a status query's, a callback's): it replaces an answer that was not
 * final, keeping the final answer and the request's id known unless it gives its own. A final answer stored (a
 * callback that came first) is kept whole, answer and id with it.
 */
export function decideAnswer(r: RequestSnapshot, outcome: ProviderOutcome, facts: AnswerFacts = {}): RequestChange {
  if (isFinalStatus(r.status)) return { kind: 'keep', reason: `final (${r.status})` };
  return move(r, outcome.status, {
    ...outcomeSet(outcome), answer: facts.answer ?? r.answer, conversation_id: facts.conversationId ?? r.conversationId,
  }, { answer: r.answer, conversation_id: r.conversationId });
}

/**
 * A new request leaves (under `providerReference` when given, else the id it had): whatever was known of the earlier
 * one (its answer, its id, the status queries about it, a claim) no longer describes it. A final answer is never sent
 * again, unless the provider said the request ended without moving money (`ended`), or it refused the request for good
 * and the caller sends again over a refusal (`overRefusal`: an on-ramp's fiat refund, sent again until paid, CONTRACT
 * §18; a refusal is a final "not paid"). A success is never sent again. `expectedSends`: only if no other worker sent
 * it since the caller read `sends`.
 */
export function decideSend(r: RequestSnapshot, providerReference?: string, expectedSends?: number, overRefusal = false): RequestChange {
  // A refusal is the provider's last word (rejected is only written once final), never a success recorded beside it.
  const refused = r.status === 'rejected' && r.answer !== 'paid';
  if (isFinalStatus(r.status) && !r.ended && !(overRefusal && refused)) return { kind: 'keep', reason: `final (${r.status})` };
  if (expectedSends !== undefined && r.sends !== expectedSends) return { kind: 'keep', reason: `sent by another (${r.sends} sends)` };
  return move(r, 'sending', {
    provider_reference: providerReference ?? r.providerReference, receipt: null, failure: null, ended: false,
    answer: null, conversation_id: providerReference ?? null, status_queries: [], claimed: null, sends: r.sends + 1,
  }, { sends: r.sends });
}

/**
 * A payout's final answer (a status answer, corroborated) is kept with the provider's word: the outcome replaces one
 * that was not final; a final outcome stored stays, and the answer is recorded beside it. The claim it settles is gone.
 */
export function decideStatusAnswer(r: RequestSnapshot, answer: PayoutAnswer, outcome: ProviderOutcome): RequestChange {
  if (isFinalStatus(r.status)) return { kind: 'fields', set: { answer, claimed: null, updated_at: NOW } };
  return move(r, outcome.status, { ...outcomeSet(outcome), answer, claimed: null });
}

/** A collection's (corroborated) success, recorded in the unit that credits it: over any answer but an earlier success. */
export function decideSuccess(r: RequestSnapshot, outcome: ProviderOutcome): RequestChange {
  if (outcome.status !== 'succeeded') return { kind: 'keep', reason: `not a success (${outcome.status})` };
  if (r.status === 'succeeded') return { kind: 'keep', reason: 'succeeded already' };
  return move(r, 'succeeded', outcomeSet(outcome));
}

/**
 * The sandbox's answer to a repeated request: a temporary failure is evaluated again (its new answer replaces it, one
 * more evaluation); any other answer is the sandbox's last word.
 */
export function decideSandboxRepeat(r: RequestSnapshot, evaluated: ProviderOutcome): RequestChange {
  if (r.status !== 'temporary_failure') return { kind: 'keep', reason: `answered (${r.status})` };
  return move(r, evaluated.status, { ...outcomeSet(evaluated), evaluations: r.evaluations + 1 }, { evaluations: r.evaluations });
}
