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

/** Decides `fact` about `id` in `unit`, answering the plan's outcome ('gone' when there is no such subject). */
export async function decideIn<S, F>(unit: Unit, flow: Flow<S, F>, id: string, fact: F): Promise<string> {
  const snapshot = await flow.load(unit, id);
  if (snapshot === undefined) return 'gone';
  const p = flow.decide(snapshot, fact);
  await apply(unit, p, flow.views);
  return p.outcome;
}
