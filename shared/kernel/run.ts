// A fact decided in one unit: load (and lock) the snapshot, decide, apply. The loader locks every row the decision may
// move, so no concurrent unit can make the plan stale: a StalePlanError is a loader's bug and rolls the unit back.
// The adapter that produced the fact was called before, outside any transaction.
import type { Unit } from '../db/unit-of-work.js';
import { apply, type Views } from './apply.js';
import type { Plan } from './plan.js';

export interface Flow<S, F> {
  /** Reads and locks (FOR UPDATE) what the decision needs; undefined when the subject does not exist. */
  load: (unit: Unit, id: string) => Promise<S | undefined>;
  decide: (snapshot: S, fact: F) => Plan;
  views: Views;
}

export interface Decided {
  /** The plan's outcome ('gone' when there is no such subject). */
  outcome: string;
  /** The rows the plan moved, by id, as updated (an API answers with its resource). */
  moved: Map<string, Record<string, unknown>>;
}

/**
 * decideIn(), answering the rows the plan moved as well. `held`: the snapshot built from rows the caller locked in
 * this unit and holds as they are now (what the loader would read again), so they are not read twice.
 */
export async function decideAndApply<S, F>(unit: Unit, flow: Flow<S, F>, id: string, fact: F, held?: S): Promise<Decided> {
  const snapshot = held ?? (await flow.load(unit, id));
  if (snapshot === undefined) return { outcome: 'gone', moved: new Map() };
  const p = flow.decide(snapshot, fact);
  return { outcome: p.outcome, moved: await apply(unit, p, flow.views) };
}

/** Decides `fact` about `id` in `unit`, answering the plan's outcome ('gone' when there is no such subject). */
export async function decideIn<S, F>(unit: Unit, flow: Flow<S, F>, id: string, fact: F): Promise<string> {
  return (await decideAndApply(unit, flow, id, fact)).outcome;
}
