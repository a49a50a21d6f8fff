// The simulator's ledger and statuses, carrying out plans as apply() does: a move only from the status it names, an
// entry once per reference, a guarded debit refused below zero. The same invariant checks as apply() run first.
import { assertPlan } from '../../shared/kernel/invariants.js';
import type { Plan } from '../../shared/kernel/plan.js';
import { accountKey } from '../../shared/domain/ledger.js';

export class ModelLedger {
  readonly balances = new Map<string, bigint>();
  readonly references = new Set<string>();

  balance(key: string): bigint {
    return this.balances.get(key) ?? 0n;
  }

  /** Posts an entry; a repeated reference is a no-op; a guarded overdraft throws (the plan's unit rolls back). */
  post(entry: Plan['entries'][number]['entry']): void {
    if (entry.reference && this.references.has(entry.reference)) return;
    for (const p of entry.postings) {
      const key = accountKey(p.account);
      if (p.noOverdraft && this.balance(key) + p.amount < 0n) throw new InsufficientInModel(key);
    }
    for (const p of entry.postings) this.balances.set(accountKey(p.account), this.balance(accountKey(p.account)) + p.amount);
    if (entry.reference) this.references.add(entry.reference);
  }
}

export class InsufficientInModel extends Error {
  constructor(readonly account: string) {
    super(`overdraft refused on ${account}`);
  }
}

/** Statuses by `resource:id`; apply() in the model: all of a plan or none of it. */
export function applyInModel(p: Plan, statuses: Map<string, string>, ledger: ModelLedger, onJob: (job: Plan['jobs'][number]) => void): 'applied' | 'stale' {
  assertPlan(p);
  // Each move from where the plan's moves so far left its row (a row's path), as apply() checks them.
  const after = new Map<string, string>();
  for (const m of p.moves) {
    const key = `${m.machine.resource}:${m.id}`;
    if ((after.has(key) ? after.get(key) : statuses.get(key)) !== m.from) return 'stale';
    after.set(key, m.to);
  }
  const before = new Map(ledger.balances);
  const refs = new Set(ledger.references);
  try {
    for (const { entry } of p.entries) ledger.post(entry);
  } catch (err) {
    ledger.balances.clear();
    for (const [k, v] of before) ledger.balances.set(k, v);
    ledger.references.clear();
    for (const r of refs) ledger.references.add(r);
    throw err;
  }
  for (const m of p.moves) statuses.set(`${m.machine.resource}:${m.id}`, m.to);
  for (const job of p.jobs) onJob(job);
  return 'applied';
}
