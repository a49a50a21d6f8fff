// What the fuzzer knows about the service comes from the OpenAPI document it serves, never from a hand-kept list.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';

const addFormats = formats as unknown as typeof formats.default;
export type Schema = Record<string, any>;
export type OpenApi = { paths: Record<string, Record<string, any>>; components: { schemas: Record<string, Schema> } } & Record<string, any>;

export interface Param {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  schema: Schema;
  example?: unknown;
}

export interface Operation {
  id: string;
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** OpenAPI path, e.g. /api/v1/business/customers/{id}. */
  path: string;
  params: Param[];
  body?: { schema: Schema; required: boolean; examples: unknown[] };
  /** Every status the document says this operation can answer. */
  statuses: Set<number>;
  /** Validators of the 2xx bodies, by status. */
  responses: Map<number, ValidateFunction>;
  /** Validators of the error bodies, by status: only the codes (and their details) this operation declares. */
  errors: Map<number, ValidateFunction>;
  /** The resource collection an id in this path names (`/wallets/{id}/balance` -> `wallets`). */
  collection: string;
  /** The pool the ids in its answers go to (`/wallets/{id}/verification-challenges` -> `challenges`). */
  produces: string;
}

/** A collection's name from a resource's: `beneficiary` -> `beneficiaries`, `quote` -> `quotes`, `address` -> `addresses`. */
export function plural(word: string): string {
  return word.endsWith('y') ? `${word.slice(0, -1)}ies` : word.endsWith('s') ? `${word}es` : `${word}s`;
}

/** JSON pointer segment escaping. */
function seg(s: string): string {
  return s.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** The schema a `$ref` (within the document) stands for. */
export function resolveRef(doc: OpenApi, schema: Schema): Schema {
  let s = schema;
  for (let i = 0; i < 10 && typeof s?.$ref === 'string'; i++) {
    s = s.$ref.replace(/^[^#]*#\//, '').split('/').reduce((n: any, p: string) => n?.[p.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
  }
  return s ?? {};
}

/**
 * The collection a path's id names: the segment before the first `{param}`, or the first segment; its last word, as
 * answers name their pools (`/payment-intents/{id}` -> `intents`, like the `PaymentIntent` schema).
 */
function collectionOf(path: string, base: string): string {
  const parts = path.slice(base.length).split('/').filter(Boolean);
  const firstParam = parts.findIndex((p) => p.startsWith('{'));
  return ((firstParam > 0 ? parts[firstParam - 1] : parts.filter((p) => p !== 'sandbox')[0]) ?? '').split('-').pop()!;
}

/**
 * The collection an answer's ids belong to, from the schema the document names for it: `Transaction` (or a
 * `TransactionList`) -> `transactions`, `WalletVerificationChallenge` -> `challenges` (its last word).
 */
function producedBy(op: Schema): string | undefined {
  const ok = Object.entries(op.responses as Record<string, Schema>).find(([status]) => status.startsWith('2'))?.[1];
  const ref: unknown = ok?.content?.['application/json']?.schema?.$ref;
  if (typeof ref !== 'string') return undefined;
  const name = ref.split('/').pop()!.replace(/List$/, '');
  const word = name.split(/(?=[A-Z])/).pop()!.toLowerCase();
  return plural(word);
}

/** The collection an answer's id belongs to: the last literal segment, its last word (`verification-challenges` -> `challenges`). */
function producesOf(path: string, base: string): string {
  const literal = path.slice(base.length).split('/').filter((p) => p && !p.startsWith('{'));
  return literal[literal.length - 1]?.split('-').pop() ?? '';
}

export function responseAjv(doc: OpenApi): Ajv2020 {
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  addFormats(ajv);
  ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
  ajv.addFormat('evm-address', /^0x[0-9a-fA-F]{40}$/);
  ajv.addSchema({ ...doc, $id: 'openapi.json' });
  return ajv;
}

/** Every operation of the document, with validators for its success bodies. */
export function operationsOf(doc: OpenApi, base: string, ajv: Ajv2020): Operation[] {
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    if (!path.startsWith(base)) continue;
    for (const [method, op] of Object.entries(item)) {
      const params: Param[] = (op.parameters ?? []).map((p: Schema) => resolveRef(doc, p) as Param).map((p: Param) => ({ ...p, required: Boolean(p.required) }));
      const media = op.requestBody?.content?.['application/json'];
      const responses = new Map<number, ValidateFunction>();
      const errors = new Map<number, ValidateFunction>();
      for (const [status, r] of Object.entries(op.responses as Record<string, Schema>)) {
        const code = Number(status);
        // A shared response is a $ref into components.responses; the pointer follows it.
        const at = typeof r.$ref === 'string' ? r.$ref.replace(/^#/, '') : `/paths/${seg(path)}/${method}/responses/${status}`;
        if (!resolveRef(doc, r).content?.['application/json']) continue;
        const validate = ajv.compile({ $ref: `openapi.json#${at}/content/application~1json/schema` });
        (code >= 200 && code < 300 ? responses : errors).set(code, validate);
      }
      ops.push({
        id: op.operationId,
        method: method.toUpperCase() as Operation['method'],
        path,
        params,
        body: media
          ? { schema: media.schema, required: op.requestBody.required !== false, examples: Object.values((media.examples ?? {}) as Record<string, { value: unknown }>).map((e) => e.value) }
          : undefined,
        statuses: new Set(Object.keys(op.responses).map(Number)),
        responses,
        errors,
        collection: collectionOf(path, base),
        produces: producedBy(op) ?? producesOf(path, base),
      });
    }
  }
  // Creators first (a POST on a collection), each after the creators of the ids its body names (a quote names a
  // beneficiary, an off-ramp a quote), so valid requests name real, fresh resources; ending a resource (DELETE, or a
  // POST .../cancel) last, so it does not take every live resource away from the operations that need one (a
  // payment intent cancelled before anything paid it leaves no treasury deposit to read).
  const depth = creatorDepths(doc, ops);
  const ends = (o: Operation) => o.method === 'DELETE' || (o.method === 'POST' && o.path.endsWith('/cancel'));
  const order = (o: Operation) => (o.method === 'POST' && !o.path.includes('{') ? depth.get(o.id)! : ends(o) ? 1000 : 100);
  return ops.sort((a, b) => order(a) - order(b) || a.path.localeCompare(b.path) || a.method.localeCompare(b.method));
}

/** Names ending in `_id` anywhere in a schema (through $refs): the resources a request body points at. */
function idNames(doc: OpenApi, schema: Schema, seen = new Set<Schema>()): Set<string> {
  const out = new Set<string>();
  const s = resolveRef(doc, schema);
  if (!s || typeof s !== 'object' || seen.has(s)) return out;
  seen.add(s);
  for (const [name, sub] of Object.entries((s.properties ?? {}) as Record<string, Schema>)) {
    if (name.endsWith('_id')) out.add(name.slice(0, -3));
    for (const inner of idNames(doc, sub, seen)) out.add(inner);
  }
  return out;
}

function creatorDepths(doc: OpenApi, ops: Operation[]): Map<string, number> {
  const creators = ops.filter((o) => o.method === 'POST' && !o.path.includes('{'));
  const byProduct = new Map(creators.map((o) => [o.produces, o]));
  const depths = new Map<string, number>();
  const depthOf = (op: Operation, stack: string[] = []): number => {
    if (depths.has(op.id)) return depths.get(op.id)!;
    if (stack.includes(op.id)) return 0;
    let d = 0;
    for (const name of op.body ? idNames(doc, op.body.schema) : []) {
      const producer = byProduct.get(plural(name));
      if (producer && producer !== op) d = Math.max(d, 1 + depthOf(producer, [...stack, op.id]));
    }
    depths.set(op.id, d);
    return d;
  };
  for (const op of creators) depthOf(op);
  return depths;
}
