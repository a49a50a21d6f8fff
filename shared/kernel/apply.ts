// The one way a plan is carried out: every move a compare-and-set from the status the decision read (through
// transition(): history row, event; a row's consecutive moves as one statement, transitionPath()), every entry
// posted, every job staged, all in the caller's unit. A move whose row
// is no longer where the decision saw it makes the whole plan stale: nothing of it may be written. What follows a
// move in its unit (a transaction's: followMove, shared/domain/transaction-moves.ts) runs last, once the plan is written.
import type { Unit } from '../db/unit-of-work.js';
import { postEntry } from '../domain/ledger.js';
import { TRANSACTION_MACHINE, type Machine } from '../domain/machines.js';
import { moveRecord, pathWritable, transitionAll, transitionPath } from '../domain/transition.js';
import { assertPlan } from './invariants.js';
import { continuesPath, isEmpty, type Move, type Plan } from './plan.js';

type ViewOf = (row: any) => Record<string, unknown> | Promise<Record<string, unknown>>;

/** A machine's view with what follows each of its moves in the unit (run after the plan's entries and jobs). */
export interface Followed {
  view: ViewOf;
  follow: (unit: Unit, row: any) => Promise<void>;
}

/**
 * The resource as the API shows it, for a move's event, per machine; a transaction's also names what follows its
 * move (TRANSACTION_VIEWS, shared/domain/transaction-moves.ts), which apply() refuses to go without.
 */
export type Views = ReadonlyMap<Machine<any>, ViewOf | Followed>;

/** A move found its row elsewhere than the snapshot said: the unit rolls back and the fact is decided again. */
export class StalePlanError extends Error {
  constructor(readonly resource: string, readonly id: string, readonly expected: string | null) {
    super(`${resource} ${id} is no longer ${expected ?? 'absent'}`);
    this.name = 'StalePlanError';
  }
}

/** `next` makes the same move as `m` on another row of its machine, with no other column set. */
function sameMove(m: Move, next: Move): boolean {
  return next.machine === m.machine && next.from === m.from && next.to === m.to && next.reason === m.reason && !m.set && !next.set;
}

/** Carries the plan out in `unit`; answers the moved rows by id. Throws StalePlanError (roll back) on a lost race. */
export async function apply(unit: Unit, p: Plan, views: Views): Promise<Map<string, Record<string, unknown>>> {
  assertPlan(p);
  const moved = new Map<string, Record<string, unknown>>();
  if (isEmpty(p)) return moved;
  const follows: [Followed['follow'], Record<string, unknown>][] = [];
  for (const { entry, guarded } of p.entries) if (guarded) await postEntry(unit.em, p.scope, entry);
  for (let i = 0; i < p.moves.length;) {
    const m = p.moves[i]!;
    if (m.machine.platform || m.machine.embedded) {
      // A chain send or inflow, or a transaction's refund: a compare-and-set with no history row or event of its own.
      const row = await moveRecord<string, Record<string, unknown>>(unit.em, m.machine, { id: m.id, to: m.to, expected: m.from, set: m.set });
      if (!row) throw new StalePlanError(m.machine.resource, m.id, m.from);
      moved.set(m.id, row);
      i++;
      continue;
    }
    const shown = views.get(m.machine);
    if (!shown) throw new Error(`no view for ${m.machine.resource}`);
    const { view, follow } = typeof shown === 'function' ? { view: shown, follow: undefined } : shown;
    if (!follow && m.machine === TRANSACTION_MACHINE) throw new Error('a transaction moves with what follows its move (TRANSACTION_VIEWS)');
    // The same row moving on from where this move leaves it (created -> signing -> submitting): one statement for the path.
    let next = i + 1;
    while (next < p.moves.length && continuesPath(p.moves[next - 1], p.moves[next]!)) next++;
    const steps = p.moves.slice(i, next).map(({ to, set, reason }) => ({ to, set, reason }));
    if (steps.length > 1 && pathWritable(m.machine, m.from!, steps)) {
      const rows = await transitionPath<string, Record<string, unknown>>(unit, m.machine, { scope: p.scope, id: m.id, from: m.from!, steps, view });
      if (!rows) throw new StalePlanError(m.machine.resource, m.id, m.from);
      moved.set(m.id, rows[rows.length - 1]!);
      if (follow) for (const row of rows) follows.push([follow, row]);
      i = next;
      continue;
    }
    // The moves after it making the same move with nothing else set (a payout batch's items): one statement for all.
    let end = i + 1;
    while (end < p.moves.length && sameMove(m, p.moves[end]!)) end++;
    const ids = p.moves.slice(i, end).map((x) => x.id);
    const done = await transitionAll(unit, m.machine, { scope: p.scope, ids, to: m.to, expected: m.from!, set: m.set, reason: m.reason, view });
    if (done.length !== ids.length) throw new StalePlanError(m.machine.resource, ids.find((id) => !done.some((d) => d.row.id === id))!, m.from);
    for (const { row } of done) {
      moved.set(row.id, row);
      if (follow) follows.push([follow, row]);
    }
    i = end;
  }
  for (const { entry, guarded } of p.entries) if (!guarded) unit.post(p.scope, entry);
  for (const job of p.jobs) await unit.stage(job, p.scope);
  for (const [follow, row] of follows) await follow(unit, row);
  return moved;
}
