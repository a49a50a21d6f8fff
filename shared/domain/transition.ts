import { updateReturning, type Unit } from '../db/unit-of-work.js';
import type { EntityManager } from 'typeorm';
import type { JobRequest } from '../queues/producer.js';
import type { EventScope } from './events.js';
import type { EntryInput } from './ledger.js';
import { REFUND_MACHINE, sourcesOf, type EventType, type Machine } from './machines.js';
import { planOnce } from '../db/prepared-client.js';

import { NOW } from '../kernel/plan.js';

/** Sets a column to the database's clock in a transition's UPDATE (the kernel's, so pure decisions can name it). */
export { NOW };

export interface TransitionInput<S extends string, R> {
  scope: EventScope;
  id: string;
  to: S;
  /**
   * The status the caller saw (compare-and-set): the move happens only while the row is still there. A job that read
   * its row before a newer decision then changes nothing. Several: the caller accepts any of them (a redelivery from
   * whichever end a message reached). Required: no move is made from a status nobody read.
   */
  expected: S | readonly S[];
  /** Other columns changed in the same UPDATE (objects are stored as JSON). */
  set?: Record<string, unknown>;
  /** Why, for the history row (a failure code, `retry`, `reorg`). */
  reason?: string;
  /** The resource as the API shows it, from the updated row: the event's data. */
  view: (row: R) => Record<string, unknown> | Promise<Record<string, unknown>>;
  /** The ledger entry this change makes, if any (its reference makes a repeat a no-op); posted last in the unit. */
  ledger?: (row: R) => EntryInput | null;
  /** Jobs this change starts, staged in the outbox and enqueued after the commit. */
  jobs?: (row: R) => JobRequest[];
  /**
   * Other columns the caller's decision read, which must still hold these values for the move to happen (a
   * compare-and-set on all it read, as moveRecord's).
   */
  unchanged?: Record<string, unknown>;
  /**
   * A record written in the same statement whether the row moves or not (a webhook attempt beside its message's
   * move): an INSERT whose parameters are numbered from `first`, with `params` as their values.
   */
  alongside?: { insert: (first: number) => string; params: unknown[] };
}

export interface Moved<S extends string, R> {
  row: R;
  from: S;
}

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

/** Columns of a table that a machine embedded in its rows writes (status and data together): no other move sets them. */
const EMBEDDED: ReadonlyMap<string, readonly string[]> = new Map([[REFUND_MACHINE.table, [REFUND_MACHINE.column, 'refund']]]);

/**
 * The one way a status changes: a conditional UPDATE from an allowed previous status, a history row, the event,
 * the ledger entry and the staged jobs, all in the caller's transaction. Answers null when the row is not in a
 * status that may move to `to`, or no longer in the `expected` one (or does not exist): a duplicate job or a lost
 * race, for the caller to judge.
 */
export async function transition<S extends string, R extends Record<string, any>>(
  unit: Unit,
  machine: Machine<S>,
  input: TransitionInput<S, R>,
): Promise<Moved<S, R> | null> {
  const { id, ...rest } = input;
  return (await transitionAll(unit, machine, { ...rest, ids: [id] }))[0] ?? null;
}

/**
 * transition() for several rows of one scope making the same move in one round trip (a payout batch's items): the
 * rows that moved, in the order of `ids`, each with its history row, event, ledger entry and jobs.
 */
export async function transitionAll<S extends string, R extends Record<string, any>>(
  unit: Unit,
  machine: Machine<S>,
  input: Omit<TransitionInput<S, R>, 'id'> & { ids: string[] },
): Promise<Moved<S, R>[]> {
  if (machine.platform) throw new Error(`${machine.resource} is a platform record: move it with moveRecord()`);
  const allowed = sourcesOf(machine, input.to);
  if (!allowed.length) throw new Error(`no ${machine.resource} status may move to ${input.to}`);
  const expected: readonly S[] = typeof input.expected === 'string' ? [input.expected] : input.expected;
  const from = allowed.filter((s) => expected.includes(s));
  // A record written alongside is written whether the row moves or not: never by a move that cannot be made at all.
  if (input.alongside && !from.length) throw new Error(`${machine.resource}: a record alongside a move from ${expected.join(', ')} to ${input.to}, which the machine never makes`);
  if (!from.length || !input.ids.length) return [];
  // One id (nearly every change) as a scalar: the prepared statement's generic plan then expects one row by primary
  // key, costs no more than a custom plan, and is used, so the statement is not planned again on each call.
  const one = input.ids.length === 1;
  const params: unknown[] = [one ? input.ids[0] : input.ids, input.scope.businessId, input.scope.environment, from, input.to];
  const sets = [`${machine.column} = $5`, 'updated_at = now()', ...setClauses(machine, input.set, params)];
  const t = machine.table;
  params.push(machine.resource, input.reason ?? null);
  const [resourceParam, reasonParam] = [params.length - 1, params.length];
  const unchanged = Object.entries(input.unchanged ?? {}).map(([column, value]) => {
    if (!IDENTIFIER.test(column)) throw new Error(`bad column in transition: ${column}`);
    params.push(value);
    return ` AND ${t}.${column} IS NOT DISTINCT FROM $${params.length}`;
  }).join('');
  const alongside = input.alongside ? `alongside AS (${input.alongside.insert(params.length + 1)}),\n     ` : '';
  if (input.alongside) params.push(...input.alongside.params);
  // One round trip: lock (in id order), conditional update and the history rows. The lock is NO KEY UPDATE, as the
  // UPDATE's own: a status change never touches a key, so rows referencing this one (their foreign-key checks) never wait on it.
  // Prepared (planOnce): the scope is a filter (IS TRUE), so every plan finds the rows by their primary key.
  const rows: (R & { previous_status: S })[] = await unit.em.query(
    planOnce(`WITH ${alongside}prev AS (SELECT id, ${machine.column} AS status FROM ${t} WHERE ${one ? 'id = $1::uuid' : 'id = ANY($1::uuid[])'} AND (business_id = $2 AND environment = $3) IS TRUE ORDER BY id FOR NO KEY UPDATE),
     moved AS (UPDATE ${t} SET ${sets.join(', ')} FROM prev WHERE ${t}.id = prev.id AND prev.status = ANY($4::text[])${guarded(machine, from, input.to, t, input.reason)}${unchanged} RETURNING ${t}.*, prev.status AS previous_status),
     history AS (INSERT INTO status_history (business_id, environment, resource_type, resource_id, from_status, to_status, reason)
                 SELECT $2, $3, $${resourceParam}, id, previous_status, $5, $${reasonParam} FROM moved)
     SELECT * FROM moved`),
    params,
  );
  const order = new Map(input.ids.map((id, i) => [id, i]));
  rows.sort((a, b) => order.get(a.id)! - order.get(b.id)!);
  const out: Moved<S, R>[] = [];
  for (const updated of rows) {
    const { previous_status: previous, ...rest } = updated;
    const row = rest as unknown as R;
    if (machine.announced.includes(input.to)) unit.event(input.scope, `${machine.resource}.${input.to}` as EventType, await input.view(row));
    const entry = input.ledger?.(row);
    if (entry) unit.post(input.scope, entry);
    for (const job of input.jobs?.(row) ?? []) await unit.stage(job, input.scope);
    out.push({ row, from: previous });
  }
  return out;
}

/** `set`'s columns as SET clauses of a move's UPDATE, their values appended to `params` (objects as JSON, NOW the clock). */
function setClauses<S extends string>(machine: Machine<S>, set: Record<string, unknown> | undefined, params: unknown[]): string[] {
  const sets: string[] = [];
  for (const [column, value] of Object.entries(set ?? {})) {
    if (!IDENTIFIER.test(column) || column === machine.column) throw new Error(`bad column in transition: ${column}`);
    if (EMBEDDED.get(machine.table)?.includes(column)) throw new Error(`${column} is written by its own machine's move (moveRecord), never with another`);
    if (value === NOW) sets.push(`${column} = now()`);
    else {
      params.push(value !== null && typeof value === 'object' && !(value instanceof Date) && !Buffer.isBuffer(value) ? JSON.stringify(value) : value);
      sets.push(`${column} = $${params.length}`);
    }
  }
  return sets;
}

/** One step of a row's path through its machine: the status it reaches, the columns set with it, why. */
export interface PathStep<S extends string> {
  to: S;
  set?: Record<string, unknown>;
  reason?: string;
}

/**
 * Whether `steps` from `from` may be written by transitionPath(): every step a move the machine allows, no column set
 * to two values by two steps (each step's row is then known: a column set again to the same value, such as the
 * provider's reference, is one column), and no guard on leaving a status the path passes through (a guard is checked on
 * the row as it is before the statement, which only the first step leaves as it was).
 */
export function pathWritable<S extends string>(machine: Machine<S>, from: S, steps: readonly PathStep<S>[]): boolean {
  const columns = new Map<string, unknown>();
  let at = from;
  for (const [i, step] of steps.entries()) {
    if (!sourcesOf(machine, step.to).includes(at)) return false;
    if (i > 0 && machine.guards?.[at]?.(step.to, machine.table, step.reason)) return false;
    for (const [column, value] of Object.entries(step.set ?? {})) {
      if (columns.has(column) && !Object.is(columns.get(column), value)) return false;
      columns.set(column, value);
    }
    at = step.to;
  }
  return steps.length > 0;
}

/**
 * Several moves of one row in a row (created -> signing -> submitting), each from the status the one before reached,
 * written as one: a single conditional UPDATE from `from` to the last status with every step's columns, a history row
 * per step, and each announced step's event from the row as that step left it (the row before, with the columns the
 * steps so far set, as the UPDATE wrote them). Only for a path pathWritable() accepts. Answers the row after each step,
 * or null when the row was no longer in `from` (nothing is written).
 */
export async function transitionPath<S extends string, R extends Record<string, any>>(
  unit: Unit,
  machine: Machine<S>,
  input: { scope: EventScope; id: string; from: S; steps: readonly PathStep<S>[]; view: (row: R) => Record<string, unknown> | Promise<Record<string, unknown>> },
): Promise<R[] | null> {
  if (!pathWritable(machine, input.from, input.steps)) throw new Error(`${machine.resource} ${input.id}: a path transitionPath cannot write`);
  const last = input.steps[input.steps.length - 1]!;
  const froms = [input.from, ...input.steps.slice(0, -1).map((step) => step.to)];
  const params: unknown[] = [input.id, input.scope.businessId, input.scope.environment, input.from, last.to, machine.resource,
    froms, input.steps.map((step) => step.to), input.steps.map((step) => step.reason ?? null)];
  const sets = [`${machine.column} = $5`, 'updated_at = now()', ...setClauses(machine, Object.assign({}, ...input.steps.map((step) => step.set ?? {})), params)];
  const t = machine.table;
  const guard = machine.guards?.[input.from]?.(input.steps[0]!.to, t, input.steps[0]!.reason);
  // `path_after` false: the row as it was before the statement, read under the same lock as transitionAll's.
  const rows: (R & { path_after: boolean })[] = await unit.em.query(
    planOnce(`WITH prev AS (SELECT * FROM ${t} WHERE id = $1::uuid AND (business_id = $2 AND environment = $3) IS TRUE FOR NO KEY UPDATE),
     moved AS (UPDATE ${t} SET ${sets.join(', ')} FROM prev WHERE ${t}.id = prev.id AND prev.${machine.column} = $4${guard ? ` AND (${guard})` : ''} RETURNING ${t}.*),
     history AS (INSERT INTO status_history (business_id, environment, resource_type, resource_id, from_status, to_status, reason)
                 SELECT $2, $3, $6, moved.id, p.from_status, p.to_status, p.reason
                   FROM moved, unnest($7::text[], $8::text[], $9::text[]) WITH ORDINALITY AS p(from_status, to_status, reason, o) ORDER BY p.o)
     SELECT true AS path_after, moved.* FROM moved UNION ALL SELECT false, prev.* FROM prev`),
    params,
  );
  const strip = (row: R & { path_after: boolean }): R => {
    const { path_after: _after, ...rest } = row;
    return rest as unknown as R;
  };
  const afterRow = rows.find((r) => r.path_after);
  const beforeRow = rows.find((r) => !r.path_after);
  if (!afterRow || !beforeRow) return null;
  const after = strip(afterRow);
  const out: R[] = [];
  let row: Record<string, unknown> = strip(beforeRow);
  for (const step of input.steps) {
    row = { ...row, ...Object.fromEntries(Object.keys(step.set ?? {}).map((column) => [column, after[column]])), [machine.column]: step.to, updated_at: after.updated_at };
    out.push((step === last ? after : row) as R);
  }
  for (const [i, step] of input.steps.entries()) {
    if (machine.announced.includes(step.to)) unit.event(input.scope, `${machine.resource}.${step.to}` as EventType, await input.view(out[i]!));
  }
  return out;
}

/**
 * A platform record's move (machine.platform: a chain send or inflow, a provider request, which have no business
 * scope, history or event), or an embedded status's (machine.embedded: a transaction's refund, announced by its
 * transaction): the conditional UPDATE from an allowed previous status the caller read (and the machine's guards on
 * leaving it), in the caller's transaction (or alone). An embedded status may also be created (`expected` null: none
 * yet, `to` one of its initial statuses) or keep its status (`to` the one read: only `set` changes). `unchanged`: other
 * columns the caller's decision read, which must still hold those values (a compare-and-set on all it read). Answers
 * the moved row, or null when it was no longer in `expected` or as read (a duplicate or a lost race).
 */
export async function moveRecord<S extends string, R extends Record<string, any>>(
  q: Pick<EntityManager, 'query'>,
  machine: Machine<S>,
  input: { id: string; to: S; expected: S | null | readonly (S | null)[]; set?: Record<string, unknown>; unchanged?: Record<string, unknown> },
): Promise<R | null> {
  if (!machine.platform && !machine.embedded) throw new Error(`${machine.resource} is scoped to a business: move it with transition()`);
  const expected: readonly (S | null)[] = typeof input.expected === 'string' || input.expected === null ? [input.expected] : input.expected;
  const stays = machine.embedded && expected.includes(input.to) ? [input.to] : [];
  const from = [...sourcesOf(machine, input.to), ...stays].filter((s) => expected.includes(s));
  const created = expected.includes(null) && !!machine.embedded?.initial.includes(input.to);
  if (!from.length && !created) return null;
  const params: unknown[] = [input.id, from, input.to];
  const sets = [`${machine.column} = $3`];
  for (const [column, value] of Object.entries(input.set ?? {})) {
    if (!IDENTIFIER.test(column) || column === machine.column) throw new Error(`bad column in transition: ${column}`);
    if (value === NOW) sets.push(`${column} = now()`);
    else {
      params.push(machine.embedded && value !== null && typeof value === 'object' && !(value instanceof Date) ? JSON.stringify(value) : value);
      sets.push(`${column} = $${params.length}`);
    }
  }
  const conditions = [`id = $1`, `(${machine.column} = ANY($2::text[])${created ? ` OR ${machine.column} IS NULL` : ''})`];
  for (const [column, value] of Object.entries(input.unchanged ?? {})) {
    if (!IDENTIFIER.test(column)) throw new Error(`bad column in transition: ${column}`);
    params.push(value);
    conditions.push(`${column} IS NOT DISTINCT FROM $${params.length}`);
  }
  for (const status of from) {
    const guard = machine.guards?.[status]?.(input.to, machine.table, undefined);
    if (guard) conditions.push(`(${machine.column} <> '${status}' OR (${guard}))`);
  }
  const rows: R[] = await updateReturning(q, `UPDATE ${machine.table} SET ${sets.join(', ')} WHERE ${conditions.join(' AND ')} RETURNING *`, params);
  return rows[0] ?? null;
}

/** The machine's guards on leaving `from` toward `to`, as a condition on the row (`t`) for the conditional UPDATE. */
function guarded<S extends string>(machine: Machine<S>, from: S[], to: S, t: string, reason: string | undefined): string {
  const conditions = from.flatMap((status) => {
    const guard = machine.guards?.[status]?.(to, t, reason);
    return guard ? [`(prev.status <> '${status}' OR (${guard}))`] : [];
  });
  return conditions.map((c) => ` AND ${c}`).join('');
}

/**
 * Creates resources with their first status in one statement: `insert` (an INSERT ... RETURNING that names `id`) and
 * each created row's history row (from nothing to `status`), then each one's event when the status is announced.
 * `prepared`: the text is planned once (a fixed shape). `ids`: the new ids in the order the resources were created, which
 * the answer and the events keep. `with`: statements the insert reads from, as a WITH list's entries.
 */
export async function insertCreated<S extends string, R extends { id: string }>(
  unit: Unit,
  machine: Machine<S>,
  scope: EventScope,
  status: S,
  insert: { text: string; params: unknown[]; prepared: boolean; ids: readonly string[]; with?: string },
  view: (row: R) => Record<string, unknown> | Promise<Record<string, unknown>>,
): Promise<R[]> {
  const n = insert.params.length;
  // `with`: named statements the insert reads from (an address claimed for it), written before it.
  const text = `WITH ${insert.with ? `${insert.with},\n     ` : ''}created AS (${insert.text}),
     history AS (INSERT INTO status_history (business_id, environment, resource_type, resource_id, from_status, to_status)
                 SELECT $${n + 1}, $${n + 2}, $${n + 3}, id, NULL, $${n + 4} FROM created)
     SELECT * FROM created`;
  const rows: R[] = await unit.em.query(insert.prepared ? planOnce(text) : text, [...insert.params, scope.businessId, scope.environment, machine.resource, status]);
  const order = new Map(insert.ids.map((id, i) => [id, i]));
  rows.sort((a, b) => order.get(a.id)! - order.get(b.id)!);
  if (machine.announced.includes(status)) {
    for (const row of rows) unit.event(scope, `${machine.resource}.${status}` as EventType, await view(row));
  }
  return rows;
}

