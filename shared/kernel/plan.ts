// The kernel's vocabulary: a decision reads a snapshot and a fact and answers a Plan; apply() is the only code that
// carries a plan out. A plan is data: it names every status it moves (from what, to what), every ledger entry and
// every job, so a decision can be tested, replayed and simulated without a database.
import type { EntryInput } from '../domain/ledger.js';
import type { Machine } from '../domain/machines.js';
import type { EventScope } from '../domain/events.js';
import type { JobRequest } from '../queues/producer.js';

/**
 * One compare-and-set: the row moves only while it is still in `from`, the status the decision read (null: an
 * embedded status not there yet, such as a transaction's refund, created by this move).
 */
export interface Move {
  machine: Machine<any>;
  id: string;
  from: string | null;
  to: string;
  /** Other columns changed with the status (objects are stored as JSON). */
  set?: Record<string, unknown>;
  /** Why, for the history row (a failure code, `retry`, `reorg`). */
  reason?: string;
}

/**
 * A ledger entry of the plan. `guarded`: a debit that must be refused where it is decided (an overdraft answered as
 * 409 or action_required), posted at once; every other entry is posted last in the unit, just before the commit.
 */
export interface PlannedEntry {
  entry: EntryInput;
  guarded?: boolean;
}

/** What the decision answers for the log and the job's return value, and whether anything changes. */
export interface Plan {
  outcome: string;
  scope: EventScope;
  moves: Move[];
  entries: PlannedEntry[];
  jobs: JobRequest[];
}

/** `next` moves the row `before` moved on from where `before` left it: the next step of that row's path. */
export function continuesPath(before: Move | undefined, next: Move): boolean {
  return before !== undefined && before.machine === next.machine && before.id === next.id && before.to === next.from;
}

/** A plan that changes nothing: a duplicate fact, a stale job, a row that moved on. */
export function nothing(scope: EventScope, outcome: string): Plan {
  return { outcome, scope, moves: [], entries: [], jobs: [] };
}

export function plan(scope: EventScope, outcome: string, parts: Partial<Omit<Plan, 'outcome' | 'scope'>>): Plan {
  return { outcome, scope, moves: parts.moves ?? [], entries: parts.entries ?? [], jobs: parts.jobs ?? [] };
}

/** True when carrying the plan out writes nothing. */
export function isEmpty(p: Plan): boolean {
  return !p.moves.length && !p.entries.length && !p.jobs.length;
}

/** Sets a column to the database's clock in a move's UPDATE. */
export const NOW = Symbol('now');
