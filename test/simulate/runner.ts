// A deterministic simulator of the kernel's decisions: each model plays seeded orders of facts (duplicates, reordering,
// stale jobs) against a world with no I/O, applies each plan as apply() would (compare-and-set, references once,
// overdraft guards), and checks its invariants after every step and at quiescence. A failing order prints its seed and
// trace; SIM_SEED=<seed> SIM_ORDERS=1 replays exactly that order.

import { prng } from '../faults/schedule.js';

export interface Dice {
  /** An integer in [0, n). */
  int(n: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
}

export function dice(seed: number): Dice {
  const next = prng(seed);
  return {
    int: (n) => Math.floor(next() * n),
    pick: (items) => items[Math.floor(next() * items.length)],
    chance: (p) => next() < p,
  };
}

export interface Model<W, F> {
  name: string;
  /** Facts an order plays before it drains (only the facts that finish work are offered then). */
  budget: number;
  init(d: Dice): W;
  /** The next fact the world offers (a job that runs, a chain or provider answer, a client's request, a duplicate), or null: quiescent. */
  next(w: W, d: Dice, draining: boolean): F | null;
  step(w: W, fact: F): void;
  /** Broken invariants, by name; `final` at quiescence (no state without an exit). */
  check(w: W, final: boolean): string[];
  describe(fact: F): string;
}

export interface Failure {
  model: string;
  seed: number;
  violations: string[];
  trace: string[];
}

/** Plays one order; answers its failure, or null when every invariant held. */
export function play<W, F>(model: Model<W, F>, seed: number): Failure | null {
  const d = dice(seed);
  const w = model.init(d);
  const trace: string[] = [];
  const fail = (violations: string[]) => ({ model: model.name, seed, violations, trace });
  for (let i = 0, draining = false; ; i++) {
    if (i >= model.budget) draining = true;
    const fact = model.next(w, d, draining);
    if (fact === null) break;
    trace.push(model.describe(fact));
    try {
      model.step(w, fact);
    } catch (err) {
      return fail([`threw: ${(err as Error).message}`]);
    }
    const broken = model.check(w, false);
    if (broken.length) return fail(broken);
    if (i > model.budget * 10) return fail(['never quiescent: facts keep coming']);
  }
  const broken = model.check(w, true);
  return broken.length ? fail(broken) : null;
}

/** Plays `orders` seeds from `first`; answers the first failure, or null. */
export function playMany<W, F>(model: Model<W, F>, first: number, orders: number): Failure | null {
  for (let s = first; s < first + orders; s++) {
    const failure = play(model, s);
    if (failure) return failure;
  }
  return null;
}

export function formatFailure(f: Failure): string {
  return [`${f.model}: seed ${f.seed} broke ${f.violations.join('; ')}`, `replay: SIM_SEED=${f.seed} SIM_ORDERS=1 npm run test:simulate`, ...f.trace.map((t, i) => `  ${i + 1}. ${t}`)].join('\n');
}
