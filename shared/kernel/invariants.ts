// What every plan must satisfy before apply() writes any of it, checked by name; the simulator checks the same.
import { sourcesOf } from '../domain/machines.js';
import { continuesPath, type Plan } from './plan.js';

export class KernelInvariantError extends Error {
  constructor(readonly invariant: string, detail: string) {
    super(`kernel invariant ${invariant} broken: ${detail}`);
    this.name = 'KernelInvariantError';
  }
}

function check(holds: boolean, invariant: string, detail: () => string): void {
  if (!holds) throw new KernelInvariantError(invariant, detail());
}

/** Throws KernelInvariantError for the first invariant the plan breaks. */
export function assertPlan(p: Plan): void {
  const seen = new Set<string>();
  for (const [i, m] of p.moves.entries()) {
    const key = `${m.machine.resource}:${m.id}`;
    // A row moves once, or along a path: each of its later moves right after the one before, from where it left the row.
    check(!seen.has(key) || continuesPath(p.moves[i - 1], m), 'row_moves_along_one_path', () => `${key} moves again in one plan from ${m.from}, not on from where its move before left it`);
    seen.add(key);
    // An embedded status (a transaction's refund) may keep its status (only its data changes) or be created (from null).
    const embedded = m.machine.embedded as { initial: readonly string[] } | undefined;
    check(m.from !== m.to || !!embedded, 'move_changes_status', () => `${key} ${m.from} -> ${m.to}`);
    const allowed = m.from === null ? !!embedded?.initial.includes(m.to) : m.from === m.to || sourcesOf(m.machine, m.to).includes(m.from);
    check(allowed, 'move_allowed_by_machine', () => `${key} ${m.from ?? 'none'} -> ${m.to}`);
  }
  const references = new Set<string>();
  for (const { entry } of p.entries) {
    const name = entry.reference ?? entry.kind;
    check(entry.reference !== undefined, 'entry_has_reference', () => name);
    check(!references.has(name), 'one_entry_per_reference', () => name);
    references.add(name);
    check(entry.postings.length >= 2, 'entry_has_two_sides', () => name);
    const perAsset = new Map<string, bigint>();
    for (const posting of entry.postings) perAsset.set(posting.account.asset, (perAsset.get(posting.account.asset) ?? 0n) + posting.amount);
    for (const [asset, sum] of perAsset) check(sum === 0n, 'entry_balances', () => `${name}: ${asset} sums to ${sum}`);
    check(entry.postings.every((posting) => posting.amount !== 0n), 'posting_moves_money', () => name);
  }
  const jobIds = new Set<string>();
  for (const job of p.jobs) {
    check(!jobIds.has(job.id), 'one_job_per_id', () => job.id);
    jobIds.add(job.id);
  }
}
