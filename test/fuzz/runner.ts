// Sends the generated requests to a listening server over plain node:http and checks every answer against the document.
import { request } from 'node:http';
import fc from 'fast-check';
import type { ValidateFunction } from 'ajv';
import { IdPools, type FuzzContext, type FuzzRequest } from './generate.js';
import { kindsFor, requestsFor } from './kinds.js';
import { operationsOf, responseAjv, type OpenApi, type Operation } from './operations.js';
import { MAX_DETAIL_CHARS, MAX_DETAIL_ITEMS, MAX_ERROR_BYTES } from '../../shared/errors.js';

export interface FuzzOptions {
  doc: OpenApi;
  /** Business path prefix, e.g. /api/v1/business. */
  base: string;
  url: URL;
  key: string;
  seed: number;
  /** bounded: every operation x every kind it admits, `perKind` times each. long: random draws until `requests` are sent. */
  mode: 'bounded' | 'long';
  perKind: number;
  requests: number;
  timeoutMs: number;
  onProgress?: (sent: number) => void;
}

export interface Answer {
  status: number | null;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  error?: string;
}

export interface Finding {
  request: FuzzRequest;
  answer: Answer;
  problems: string[];
}

export interface FuzzReport {
  sent: number;
  findings: Finding[];
  /** Per operation id: statuses seen, and the kinds sent. */
  coverage: Map<string, { statuses: Map<number, number>; kinds: Set<string>; codes: Set<string> }>;
  operations: Operation[];
}

function send(url: URL, req: FuzzRequest, timeoutMs: number): Promise<Answer> {
  return new Promise((resolve) => {
    const body = req.body === undefined ? undefined : Buffer.from(req.body, 'utf8');
    const headers: Record<string, string | string[]> = { ...req.headers, Connection: 'close' };
    if (body) headers['Content-Length'] = String(body.length);
    let done = false;
    const finish = (a: Answer) => {
      if (!done) {
        done = true;
        resolve(a);
      }
    };
    try {
      const r = request({ host: url.hostname, port: url.port, method: req.method, path: req.path, headers, timeout: timeoutMs }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => finish({ status: res.statusCode ?? null, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', (e) => finish({ status: res.statusCode ?? null, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), error: e.message }));
      });
      r.on('timeout', () => {
        r.destroy();
        finish({ status: null, headers: {}, body: '', error: `no answer within ${timeoutMs} ms` });
      });
      // The server may answer (413, 400) and close before it has read a large body: the answer still counts.
      r.on('error', (e) => finish({ status: null, headers: {}, body: '', error: e.message }));
      r.end(body);
    } catch (e) {
      // Node's client refused to send it (a header it will not write): not the server's finding.
      finish({ status: -1, headers: {}, body: '', error: (e as Error).message });
    }
  });
}

// Rounds of valid requests over every operation before the hostile ones: later operations need what earlier ones
// created (a priced quote for an off-ramp, a transaction to read).
const VALID_ROUNDS = 16;
const EXTRA_VALID_DRAWS = 24;

const ENVELOPE_KEYS = ['code', 'details', 'message', 'requestId'];

function check(op: Operation, answer: Answer, errorSchema: ValidateFunction): string[] {
  const problems: string[] = [];
  if (answer.status === null) return [`no answer: ${answer.error}`];
  if (answer.status >= 500) problems.push(`answered ${answer.status}`);
  if (!op.statuses.has(answer.status)) problems.push(`status ${answer.status} is not declared for ${op.id}`);
  const requestId = answer.headers['x-request-id'];
  if (typeof requestId !== 'string') problems.push('no X-Request-Id header');
  const type = String(answer.headers['content-type'] ?? '');
  if (!type.startsWith('application/json')) return [...problems, `content-type is ${type || 'missing'}`];
  let body: any;
  try {
    body = JSON.parse(answer.body);
  } catch {
    return [...problems, 'body is not JSON'];
  }
  if (answer.status >= 200 && answer.status < 300) {
    const validate = op.responses.get(answer.status);
    if (validate && !validate(body)) problems.push(`2xx body does not match its schema: ${JSON.stringify(validate.errors?.slice(0, 3))}`);
  } else {
    if (!errorSchema(body)) problems.push(`error body does not match ErrorResponse: ${JSON.stringify(errorSchema.errors?.slice(0, 3))}`);
    const declared = op.errors.get(answer.status);
    if (declared && !declared(body)) problems.push(`error ${body?.error?.code} is not one this operation declares for ${answer.status} (or its details differ): ${JSON.stringify(declared.errors?.slice(0, 3))}`);
    const keys = Object.keys(body?.error ?? {}).sort();
    if (keys.join() !== ENVELOPE_KEYS.join() || Object.keys(body ?? {}).join() !== 'error') problems.push(`envelope keys are ${JSON.stringify(Object.keys(body ?? {}))} / ${JSON.stringify(keys)}`);
    if (body?.error?.requestId !== requestId) problems.push('error.requestId differs from X-Request-Id');
    if (Buffer.byteLength(answer.body) > MAX_ERROR_BYTES) problems.push(`error answer is ${Buffer.byteLength(answer.body)} bytes (at most ${MAX_ERROR_BYTES})`);
    const details: unknown = body?.error?.details;
    if (Array.isArray(details)) {
      if (details.length > MAX_DETAIL_ITEMS) problems.push(`details lists ${details.length} items (at most ${MAX_DETAIL_ITEMS})`);
      const long = details.find((d) => typeof d?.message === 'string' && d.message.length > MAX_DETAIL_CHARS);
      if (long) problems.push(`a details message is ${long.message.length} characters (at most ${MAX_DETAIL_CHARS})`);
    }
  }
  return problems;
}

/** ANSI-C quoting: any byte survives a paste into bash. */
function shellQuote(text: string): string {
  const escaped = [...Buffer.from(text, 'utf8')].map((b) => (b >= 0x20 && b < 0x7f && b !== 0x27 && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`)).join('');
  return `$'${escaped}'`;
}

/** A curl command for one request; the API key is left as $RAMPWAY_KEY, a long body is cut short (and says so). */
export function reproduction(url: URL, req: FuzzRequest, key: string): string {
  const parts = [`curl -i -X ${req.method} ${shellQuote(`${url.origin}${req.path}`)}`];
  for (const [name, value] of Object.entries(req.headers)) {
    for (const v of Array.isArray(value) ? value : [value]) parts.push(`-H ${shellQuote(`${name}: ${v}`).replace(key, "'\"$RAMPWAY_KEY\"$'")}`);
  }
  if (req.body !== undefined) {
    const cut = req.body.length > 300;
    parts.push(`--data-binary ${shellQuote(cut ? req.body.slice(0, 300) : req.body)}${cut ? `  # body cut: ${req.body.length} characters in all` : ''}`);
  }
  return parts.join(' \\\n    ');
}

/** Runs the fuzz: deterministic for a seed (ids the service assigns aside). */
export async function runFuzz(opts: FuzzOptions): Promise<FuzzReport> {
  const ajv = responseAjv(opts.doc);
  const errorSchema = ajv.compile({ $ref: 'openapi.json#/components/schemas/ErrorResponse' });
  const operations = operationsOf(opts.doc, opts.base, ajv);
  const pools = new IdPools();
  let keyCounter = 0;
  const ctx: FuzzContext = { doc: opts.doc, key: opts.key, pools, nextIdempotencyKey: () => `fuzz-${opts.seed}-${++keyCounter}` };
  const coverage: FuzzReport['coverage'] = new Map(operations.map((o) => [o.id, { statuses: new Map(), kinds: new Set(), codes: new Set() }]));
  const findings: Finding[] = [];
  let sent = 0;
  let step = 0;
  // One seeded generator per step: a step's requests do not depend on how many draws earlier steps made.
  const drawFor = () => fc.sample(fc.gen(), { seed: (opts.seed ^ Math.imul(++step, 0x9e3779b1)) | 0, numRuns: 1 })[0];

  const exercise = async (op: Operation, kindName: string) => {
    const kind = kindsFor(op).find((k) => k.name === kindName)!;
    for (const req of requestsFor(ctx, drawFor(), op, kind)) {
      const answer = await send(opts.url, req, opts.timeoutMs);
      if (answer.status === -1) continue;
      sent++;
      opts.onProgress?.(sent);
      const cov = coverage.get(op.id)!;
      cov.kinds.add(kindName);
      if (answer.status !== null) cov.statuses.set(answer.status, (cov.statuses.get(answer.status) ?? 0) + 1);
      const problems = check(op, answer, errorSchema);
      try {
        const code = answer.status !== null && answer.status >= 400 ? JSON.parse(answer.body)?.error?.code : undefined;
        if (typeof code === 'string') cov.codes.add(code);
      } catch {
        // not JSON: already a finding
      }
      if (problems.length) findings.push({ request: req, answer, problems });
      else if (answer.status !== null && answer.status >= 200 && answer.status < 300) {
        try {
          pools.learn(op, JSON.parse(answer.body));
        } catch {
          // checked above
        }
      }
    }
  };

  if (opts.mode === 'bounded') {
    // Valid requests for every operation first (creators before the rest), so ids exist; then every hostile kind.
    for (let round = 0; round < VALID_ROUNDS; round++) for (const op of operations) await exercise(op, 'valid');
    // A valid request may still name the wrong resource (an archived beneficiary, an unverified wallet, a currency we
    // do not serve): an operation that has not succeeded yet gets more valid draws, so only a handler that never
    // succeeds fails the coverage check, not an unlucky seed.
    const succeeded = (op: Operation) => [...coverage.get(op.id)!.statuses.keys()].some((s) => s >= 200 && s < 300);
    for (const op of operations) for (let i = 0; i < EXTRA_VALID_DRAWS && !succeeded(op); i++) await exercise(op, 'valid');
    for (const op of operations) {
      for (const kind of kindsFor(op)) for (let i = 0; i < opts.perKind; i++) await exercise(op, kind.name);
    }
  } else {
    for (const op of operations) await exercise(op, 'valid');
    while (sent < opts.requests) {
      const draw = drawFor();
      const op = operations[draw(fc.nat, { max: operations.length - 1 })];
      const kinds = kindsFor(op);
      // Half the draws are valid requests, so state builds up (more ids, archived resources, replays).
      const kind = draw(fc.boolean) ? 'valid' : kinds[draw(fc.nat, { max: kinds.length - 1 })].name;
      await exercise(op, kind);
    }
  }
  return { sent, findings, coverage, operations };
}
