// Requests for one operation: schema-valid ones (json-schema-faker, real ids) and hostile variations of them.
// Every choice is drawn from fast-check's seeded generator, so the same seed sends the same requests.
import fc from 'fast-check';
import { generateSync } from 'json-schema-faker';
import { getAddress } from 'viem';
import { plural, resolveRef, type OpenApi, type Operation, type Schema } from './operations.js';

/** The pool an `<x>_id` field draws from: its last word's collection (`payment_intent_id` -> `intents`). */
const poolOf = (field: string) => plural(field.replace(/_id$/, '').split('_').pop()!);

export type Draw = fc.GeneratorValue;

export interface FuzzRequest {
  op: Operation;
  kind: string;
  method: string;
  /** Exactly what goes on the request line (already encoded, possibly on purpose badly). */
  path: string;
  headers: Record<string, string | string[]>;
  body?: string;
}

/** Ids the service handed out, by collection, so valid requests name real resources. */
export class IdPools {
  private readonly pools = new Map<string, string[]>();
  private readonly cursors = new Map<string, string[]>();

  add(collection: string, id: string): void {
    const pool = this.pools.get(collection) ?? [];
    if (!pool.includes(id)) pool.push(id);
    this.pools.set(collection, pool.slice(-200));
  }

  /** Half the time the newest id (a fresh quote is still unused), else any. */
  pick(draw: Draw, collection: string): string | undefined {
    const pool = this.pools.get(collection);
    if (!pool?.length) return undefined;
    return draw(fc.boolean) ? pool[pool.length - 1] : pool[draw(fc.nat, { max: pool.length - 1 })];
  }

  /** Learns from a 2xx body: its own id, nested resources (`wallet: { id }`) and references (`customer_id`). */
  learn(op: Operation, body: unknown): void {
    const items = isObject(body) && Array.isArray(body.data) ? body.data : [body];
    if (isObject(body) && typeof body.next_cursor === 'string') this.cursors.set(op.id, [...(this.cursors.get(op.id) ?? []), body.next_cursor].slice(-20));
    for (const item of items) {
      if (isObject(item) && typeof item.id === 'string') this.add(op.produces, item.id);
      walk(item, (key, value) => {
        if (isObject(value) && typeof value.id === 'string') this.add(plural(key), value.id);
        else if (key.endsWith('_id') && typeof value === 'string' && UUID.test(value)) this.add(poolOf(key), value);
      });
    }
  }

  cursor(draw: Draw, opId: string): string | undefined {
    const seen = this.cursors.get(opId);
    return seen?.length ? seen[draw(fc.nat, { max: seen.length - 1 })] : undefined;
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}


function walk(value: unknown, visit: (key: string, value: unknown) => void): void {
  if (Array.isArray(value)) value.forEach((v) => walk(v, visit));
  else if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      visit(k, v);
      walk(v, visit);
    }
  }
}

/** A structured request, before a hostile kind bends it. */
export interface Draft {
  pathValues: Record<string, string>;
  query: [string, string][];
  body?: unknown;
  headers: Record<string, string | string[]>;
}

export interface FuzzContext {
  doc: OpenApi;
  key: string;
  pools: IdPools;
  /** A fresh, deterministic Idempotency-Key. */
  nextIdempotencyKey(): string;
}

function fake(ctx: FuzzContext, draw: Draw, schema: Schema): unknown {
  return generateSync(schema as any, {
    seed: draw(fc.integer, { min: 1, max: 2 ** 31 - 1 }),
    optionalsProbability: 0.5,
    // A fresh EIP-55 address: what `format: evm-address` means beyond its pattern.
    formats: { 'evm-address': (random) => getAddress(`0x${Array.from({ length: 40 }, () => random.int(0, 15).toString(16)).join('')}`) },
    refResolver: (ref: string) => resolveRef(ctx.doc, { $ref: ref }) as any,
  });
}

/** Replaces generated ids with real ones: `customer_id` from the customers pool, `wallet_id` from wallets. */
function realIds(ctx: FuzzContext, draw: Draw, value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => realIds(ctx, draw, v));
  if (!isObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = k.endsWith('_id') && typeof v === 'string' ? (ctx.pools.pick(draw, poolOf(k)) ?? v) : realIds(ctx, draw, v);
  }
  return out;
}

export function validDraft(ctx: FuzzContext, draw: Draw, op: Operation): Draft {
  const pathValues: Record<string, string> = {};
  const query: [string, string][] = [];
  for (const p of op.params) {
    if (p.in === 'path') {
      const pool = p.name === 'id' ? op.collection : poolOf(p.name);
      pathValues[p.name] = ctx.pools.pick(draw, pool) ?? String(fake(ctx, draw, p.schema));
    } else if (p.in === 'query' && (p.required || draw(fc.nat, { max: 3 }) === 0)) {
      let value: unknown = p.name === 'starting_after' ? ctx.pools.cursor(draw, op.id) : undefined;
      if (value === undefined && p.name.endsWith('_id')) value = ctx.pools.pick(draw, poolOf(p.name));
      if (value === undefined && p.example !== undefined && draw(fc.nat, { max: 3 }) > 0) value = p.example;
      value ??= fake(ctx, draw, p.schema);
      query.push([p.name, String(value)]);
    }
  }
  const headers: Record<string, string | string[]> = { Authorization: `Bearer ${ctx.key}`, Accept: 'application/json' };
  if (op.method !== 'GET') headers['Idempotency-Key'] = ctx.nextIdempotencyKey();
  let body: unknown;
  if (op.body) {
    const examples = op.body.examples;
    // Mostly the document's examples (they pass the domain's rules), sometimes anything the schema allows.
    body = examples.length && draw(fc.nat, { max: 3 }) > 0 ? structuredClone(examples[draw(fc.nat, { max: examples.length - 1 })]) : fake(ctx, draw, op.body.schema);
    body = realIds(ctx, draw, body);
    headers['Content-Type'] = 'application/json';
  }
  return { pathValues, query, body, headers };
}

export function render(op: Operation, kind: string, d: Draft, rawBody?: string): FuzzRequest {
  const path = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => d.pathValues[name] ?? `{${name}}`);
  const qs = d.query.map(([k, v]) => `${k}=${v}`).join('&');
  const body = rawBody ?? (d.body === undefined ? undefined : JSON.stringify(d.body));
  return { op, kind, method: op.method, path: qs ? `${path}?${qs}` : path, headers: d.headers, body };
}

/** Percent-encodes only what Node's client refuses on a request line (and `?`, `#`); a bad `%` sequence goes as it is. */
export function pathSafe(text: string): string {
  return text.replace(/[^\x21-\x7e]|[?#]/gu, (c) => encodeURIComponent(c));
}
