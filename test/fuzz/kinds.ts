// The kinds of hostile input, each a bend of a valid request; every operation gets every kind it admits.
import fc from 'fast-check';
import { resolveRef, type Operation } from './operations.js';
import { isObject, pathSafe, render, validDraft, type Draft, type Draw, type FuzzContext, type FuzzRequest } from './generate.js';

const WRONG_TYPES: unknown[] = [null, true, false, 0, -1, 1.5, [], {}, '', 'text', [1, 2]];
const NUMERIC_TEXT = ['1e309', '-0', 'NaN', 'Infinity', '-Infinity', '0x1A', '1_000', '١٢٣', '1e-7', '00.10', '.5', '5.', '+5', '9'.repeat(400), '1,5', ' 1 '];
const RAW_NUMBERS = ['1e309', '-0', '1e-400', '123456789012345678901234567890', '-1', '0.1', '1E+2'];
const SQL = ["' OR '1'='1", "'; DROP TABLE customers; --", '" OR 1=1 --', '1; SELECT pg_sleep(5)--', '$1', "%' --", "\\'; --"];
const TRAVERSAL = ['../../etc/passwd', '..%2f..%2fetc%2fpasswd', '..\\..\\windows\\win.ini', '/etc/passwd', '....//....//', '%2e%2e%2f'];
const ODD_UNICODE = ['\u202eevil\u202c', 'zero\u200bwidth', '😀'.repeat(40), 'e\u0301'.repeat(20), '\ufeffbom', '\uffff\ufffe', 'Ａｂｃ', 'line\u2028sep\u2029', 'İ', 'ǅ\u0085', '𝔘𝔫𝔦'];
const MALFORMED_JSON = ['{', '{"a":1,}', "{'a':1}", '{"a":}', 'undefined', '{"a":1}garbage', '\ufeff{}', '', '   ', '{"a":NaN}', '[1,2', '{"a":"\\x41"}', '{"a":"\\u12"}', '\u0000'];
const NON_OBJECT_JSON = ['[]', '"text"', '42', 'null', 'true', '[{}]', '-0', '1e309'];
const CONTENT_TYPES = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', 'application/json; charset=utf-16', 'application/xml', 'application/vnd.api+json', 'json', ''];
const BAD_IDS = [
  'not-a-uuid', '00000000-0000-0000-0000-00000000000g', 'urn:uuid:00000000-0000-4000-8000-000000000000', '%00', '%ZZ', '%E0%A4%A', '..', '..%2F..%2Fetc%2Fpasswd',
  'x'.repeat(5000), "1'%20OR%20'1'='1", '%F0%9F%98%80', '{id}', '%20', '00000000-0000-4000-8000-000000000000%20', '-1', '0', '1e309', 'null', '%2F',
];
const BAD_QUERY_VALUES = ['Infinity', '-Infinity', '1e309', 'NaN', '-1', '0', '101', '1.5', '', '%201', '0x10', 'true', '%00', 'x'.repeat(3000), "'%20OR%201=1--", '[]', '%E0%A4%A', '%ud800', '-0', '1e2'];
const EXPECTS = ['nonsense', '100-continue, x', '200-ok', 'continue', '100-Continue-Later'];
const ACCEPTS = ['text/html', 'application/xml', 'image/png', '*/*;q=0', 'application/json;q=0', 'garbage//', ''];

/** Field paths of a value (objects and arrays), root first. */
function fieldPaths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = [prefix];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...fieldPaths(v, [...prefix, i])));
  else if (isObject(value)) for (const [k, v] of Object.entries(value)) out.push(...fieldPaths(v, [...prefix, k]));
  return out;
}

function setAt(value: unknown, path: (string | number)[], next: unknown): unknown {
  if (!path.length) return next;
  const copy: any = Array.isArray(value) ? [...value] : { ...(value as object) };
  copy[path[0]] = setAt(copy[path[0]], path.slice(1), next);
  return copy;
}

function getAt(value: unknown, path: (string | number)[]): unknown {
  return path.reduce((v: any, k) => v?.[k], value);
}

/** A field (not the root, when there is one) to bend. */
function someField(draw: Draw, body: unknown, want?: (v: unknown) => boolean): (string | number)[] {
  const paths = fieldPaths(body).filter((p) => p.length > 0 && (!want || want(getAt(body, p))));
  return paths.length ? paths[draw(fc.nat, { max: paths.length - 1 })] : [];
}

/** The body as JSON text with one field replaced by raw JSON text (numbers JSON.stringify cannot write, bad escapes). */
function withRawField(body: unknown, path: (string | number)[], raw: string): string {
  const marker = '\u0001RAW\u0001';
  return JSON.stringify(setAt(body, path, marker)).replace(JSON.stringify(marker), raw);
}

type Maker = (ctx: FuzzContext, draw: Draw, op: Operation, d: Draft) => FuzzRequest | FuzzRequest[];

interface Kind {
  name: string;
  applies: (op: Operation) => boolean;
  make: Maker;
}

const hasBody = (op: Operation) => op.body !== undefined;
const isWrite = (op: Operation) => op.method !== 'GET';
const hasPathParams = (op: Operation) => op.params.some((p) => p.in === 'path');
const pick = <T>(draw: Draw, items: readonly T[]): T => items[draw(fc.nat, { max: items.length - 1 })];

const bodyField = (name: string, value: (draw: Draw, current: unknown) => unknown, want?: (v: unknown) => boolean): Kind => ({
  name,
  applies: hasBody,
  make: (_ctx, draw, op, d) => {
    const path = someField(draw, d.body, want);
    return render(op, name, { ...d, body: setAt(d.body, path, value(draw, getAt(d.body, path))) });
  },
});

const jsonType = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

export const KINDS: Kind[] = [
  { name: 'valid', applies: () => true, make: (_c, _d, op, d) => render(op, 'valid', d) },
  bodyField('wrong_type', (draw, current) => pick(draw, WRONG_TYPES.filter((w) => jsonType(w) !== jsonType(current)))),
  {
    name: 'missing_required',
    applies: hasBody,
    make: (ctx, draw, op, d) => {
      const required: string[] = resolveRef(ctx.doc, op.body!.schema).required ?? [];
      const body = isObject(d.body) ? { ...d.body } : {};
      const field = required.length ? pick(draw, required) : pick(draw, Object.keys(body).concat(['']));
      delete body[field];
      return render(op, 'missing_required', { ...d, body });
    },
  },
  {
    name: 'unknown_field',
    applies: hasBody,
    make: (_c, draw, op, d) => {
      // The long ones are named in the error's details: the answer must stay within its 16 KB anyway.
      const field = pick(draw, ['__proto__', 'constructor', 'id', 'status', 'business_id', 'environment', 'created_at', 'zz_unknown', 'f'.repeat(5_000), '\u0001'.repeat(3_000)]);
      // Written as text: an object literal's __proto__ key would set the prototype instead of a field.
      const text = JSON.stringify(isObject(d.body) ? d.body : {});
      const extra = `${JSON.stringify(field)}:${JSON.stringify(pick(draw, [{ admin: true }, 'archived', 'live', 1]))}`;
      return render(op, 'unknown_field', d, text === '{}' ? `{${extra}}` : `${text.slice(0, -1)},${extra}}`);
    },
  },
  bodyField('huge_string', (draw) => 'A'.repeat(pick(draw, [1_000, 70_000, 500_000]))),
  bodyField('huge_array', (draw) => new Array(pick(draw, [1_000, 50_000])).fill(pick(draw, ['x', 0, {}]))),
  {
    name: 'deep_nesting',
    applies: hasBody,
    make: (_c, draw, op, d) => {
      const depth = pick(draw, [33, 1_000, 100_000]);
      const open = pick(draw, ['[', '{"a":']);
      const nested = open === '[' ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
      return render(op, 'deep_nesting', d, draw(fc.boolean) ? nested : withRawField(d.body, someField(draw, d.body), nested));
    },
  },
  bodyField('nul', (draw, current) => pick(draw, [`${String(current ?? '')}\u0000`, '\u0000', 'a\u0000b'])),
  {
    name: 'lone_surrogate',
    applies: hasBody,
    make: (_c, draw, op, d) => render(op, 'lone_surrogate', d, withRawField(d.body, someField(draw, d.body), pick(draw, ['"\\ud800"', '"x\\udfff"', '"\\udc00\\ud800"']))),
  },
  bodyField('odd_unicode', (draw) => (draw(fc.boolean) ? pick(draw, ODD_UNICODE) : draw(fc.string, { unit: 'binary', minLength: 1, maxLength: 40 }))),
  bodyField('numeric_text', (draw) => pick(draw, NUMERIC_TEXT)),
  {
    name: 'raw_numbers',
    applies: hasBody,
    make: (_c, draw, op, d) => render(op, 'raw_numbers', d, withRawField(d.body, someField(draw, d.body), pick(draw, RAW_NUMBERS))),
  },
  bodyField('sql', (draw) => pick(draw, SQL)),
  bodyField('path_traversal', (draw) => pick(draw, TRAVERSAL)),
  {
    name: 'duplicate_keys',
    applies: hasBody,
    make: (_c, draw, op, d) => {
      const body = isObject(d.body) ? d.body : {};
      const keys = Object.keys(body);
      const key = keys.length ? pick(draw, keys) : 'a';
      const text = JSON.stringify(body);
      const again = `"${key}":${JSON.stringify(pick(draw, WRONG_TYPES))}`;
      return render(op, 'duplicate_keys', d, text === '{}' ? `{${again},${again}}` : `${text.slice(0, -1)},${again}}`);
    },
  },
  {
    name: 'malformed_json',
    applies: isWrite,
    make: (_c, draw, op, d) => {
      const text = JSON.stringify(d.body ?? {});
      const cut = text.slice(0, draw(fc.nat, { max: Math.max(0, text.length - 1) }));
      return render(op, 'malformed_json', { ...d, headers: { ...d.headers, 'Content-Type': 'application/json' } }, draw(fc.boolean) ? cut : pick(draw, MALFORMED_JSON));
    },
  },
  {
    name: 'non_object_json',
    applies: isWrite,
    make: (_c, draw, op, d) => render(op, 'non_object_json', { ...d, headers: { ...d.headers, 'Content-Type': 'application/json' } }, pick(draw, NON_OBJECT_JSON)),
  },
  {
    name: 'wrong_content_type',
    applies: isWrite,
    make: (_c, draw, op, d) => {
      const headers = { ...d.headers };
      const type = pick(draw, CONTENT_TYPES);
      if (type) headers['Content-Type'] = type;
      else delete headers['Content-Type'];
      return render(op, 'wrong_content_type', { ...d, headers }, JSON.stringify(d.body ?? { a: 1 }));
    },
  },
  {
    name: 'oversized_body',
    applies: isWrite,
    make: (_c, _draw, op, d) => render(op, 'oversized_body', { ...d, headers: { ...d.headers, 'Content-Type': 'application/json' } }, JSON.stringify({ padding: 'A'.repeat(1_100_000) })),
  },
  {
    name: 'unexpected_body',
    applies: (op) => isWrite(op) && !hasBody(op),
    make: (_c, draw, op, d) => render(op, 'unexpected_body', { ...d, headers: { ...d.headers, 'Content-Type': 'application/json' } }, pick(draw, ['{"a":1}', '[1]', '{"status":"archived"}'])),
  },
  {
    name: 'idempotency_key',
    applies: isWrite,
    make: (ctx, draw, op, d) => {
      const headers = { ...d.headers };
      const variant = pick(draw, ['missing', 'empty', 'short', 'long', 'latin1', 'repeated', 'control']);
      if (variant === 'missing') delete headers['Idempotency-Key'];
      else if (variant === 'empty') headers['Idempotency-Key'] = '';
      else if (variant === 'short') headers['Idempotency-Key'] = '1234567';
      else if (variant === 'long') headers['Idempotency-Key'] = 'k'.repeat(256);
      else if (variant === 'latin1') headers['Idempotency-Key'] = 'clé-idempotence-ÿ';
      else if (variant === 'control') headers['Idempotency-Key'] = 'tab\there-key';
      else headers['Idempotency-Key'] = [ctx.nextIdempotencyKey(), ctx.nextIdempotencyKey()];
      return render(op, 'idempotency_key', { ...d, headers });
    },
  },
  {
    name: 'idempotency_reused',
    applies: isWrite,
    make: (_c, draw, op, d) => {
      // The same key twice: once as drawn, then with another body (or the same one: a replay).
      const first = render(op, 'idempotency_reused', d);
      const other = op.body && draw(fc.boolean) ? { ...d, body: setAt(d.body, someField(draw, d.body), pick(draw, ['changed', 1, null])) } : d;
      return [first, render(op, 'idempotency_reused', other)];
    },
  },
  {
    name: 'expect_header',
    applies: () => true,
    make: (_c, draw, op, d) => render(op, 'expect_header', { ...d, headers: { ...d.headers, Expect: pick(draw, EXPECTS) } }),
  },
  {
    name: 'accept_header',
    applies: () => true,
    make: (_c, draw, op, d) => render(op, 'accept_header', { ...d, headers: { ...d.headers, Accept: pick(draw, ACCEPTS) } }),
  },
  {
    name: 'bad_auth',
    applies: () => true,
    make: (ctx, draw, op, d) => {
      const headers = { ...d.headers };
      const value = pick(draw, ['', 'Bearer', 'Bearer ', `Bearer svc_test_${'x'.repeat(43)}`, 'Basic Zm9vOmJhcg==', `Bearer ${ctx.key}x`, `Bearer ${ctx.key.toUpperCase()}`, `Bearer  ${ctx.key}`, 'Bearer svc_live_', 'Bearer ' + '\u00e9'.repeat(10)]);
      if (value) headers.Authorization = value;
      else delete headers.Authorization;
      return render(op, 'bad_auth', { ...d, headers });
    },
  },
  {
    name: 'bad_path_id',
    applies: hasPathParams,
    make: (_c, draw, op, d) => {
      const names = Object.keys(d.pathValues);
      const name = pick(draw, names);
      const value = draw(fc.boolean) ? pick(draw, BAD_IDS) : draw(fc.boolean) ? crypto.randomUUID() : d.pathValues[name].toUpperCase();
      return render(op, 'bad_path_id', { ...d, pathValues: { ...d.pathValues, [name]: pathSafe(value) } });
    },
  },
  {
    name: 'bad_query',
    applies: () => true,
    make: (_c, draw, op, d) => {
      const params = op.params.filter((p) => p.in === 'query').map((p) => p.name);
      const name = params.length && draw(fc.nat, { max: 3 }) > 0 ? pick(draw, params) : pick(draw, ['zz_unknown', 'limit', 'business_id']);
      const variant = pick(draw, ['value', 'value', 'repeated', 'array', 'object', 'bare']);
      const query = d.query.filter(([k]) => k !== name);
      const value = pathSafe(pick(draw, BAD_QUERY_VALUES));
      if (variant === 'value') query.push([name, value]);
      else if (variant === 'repeated') query.push([name, '1'], [name, '2']);
      else if (variant === 'array') query.push([`${name}[]`, '1']);
      else if (variant === 'object') query.push([`${name}[a]`, value]);
      else query.push([name, '']);
      return render(op, 'bad_query', { ...d, query });
    },
  },
];

/** One drawn request (or a short sequence) of the given kind for this operation. */
export function requestsFor(ctx: FuzzContext, draw: Draw, op: Operation, kind: Kind): FuzzRequest[] {
  const made = kind.make(ctx, draw, op, validDraft(ctx, draw, op));
  return Array.isArray(made) ? made : [made];
}

export function kindsFor(op: Operation): Kind[] {
  return KINDS.filter((k) => k.applies(op));
}
