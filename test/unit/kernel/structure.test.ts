import { expect } from 'chai';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import * as machines from '../../../shared/domain/machines.js';

// The kernel's structure, checked over the sources: who may post a ledger entry, and that shared/ has no import circle
// (what `npx madge --circular --extensions ts shared` answers, without fetching madge at test time).

const ROOT = resolve(import.meta.dirname, '../../..');

/** Every state machine the sources define (machines.ts exports each as `..._MACHINE`). */
const MACHINES = Object.entries(machines).filter(([name]) => name.endsWith('_MACHINE')).map(([, m]) => m as machines.Machine);

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'node_modules' ? [] : sources(path);
    return path.endsWith('.ts') && !path.endsWith('.d.ts') ? [path] : [];
  });
}

/** The source without its comments (whole-line `//` ones and block ones), so a quoted import in a comment is no edge. */
const uncommented = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

/** The module names a file imports: static, type-only, side-effect, re-exports and dynamic import() alike (a lazy import is still an edge). */
export function importsOf(text: string): string[] {
  const code = uncommented(text);
  const names = [
    ...code.matchAll(/(?:^|[\s;])(?:import|export)\s[^;'"]*?\sfrom\s*['"]([^'"]+)['"]/g),
    ...code.matchAll(/(?:^|[\s;])import\s*['"]([^'"]+)['"]/g),
    ...code.matchAll(/\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g),
  ];
  return names.map((m) => m[1]!);
}

/** Each file's imports within `files` (TypeScript 7 has no JavaScript API to parse with: the import lines are read). */
export function importGraph(files: string[]): Map<string, string[]> {
  const known = new Set(files);
  return new Map(files.map((file) => {
    const targets = importsOf(readFileSync(file, 'utf8')).filter((name) => name.startsWith('.'))
      .map((name) => resolve(dirname(file), name.replace(/\.js$/, '.ts'))).filter((target) => known.has(target));
    return [file, [...new Set(targets)]];
  }));
}

/** Every elementary circle's first appearance, as the files around it (Tarjan's components of more than one file, or a self-import). */
export function circles(graph: Map<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

/**
 * The modules a file imports values from (what runs): `import type` and all-`type` specifier lists are not; a default,
 * namespace, side-effect, dynamic or re-export import is.
 */
export function valueImportsOf(text: string): string[] {
  const code = uncommented(text);
  const named = [...code.matchAll(/(?:^|[\s;])(import|export)\s([^;'"]*?)\sfrom\s*['"]([^'"]+)['"]/g)].filter(([, , clause]) => {
    if (/^type\s/.test(clause!.trim())) return false;
    const braces = /^\{([\s\S]*)\}$/.exec(clause!.trim());
    return !braces || braces[1]!.split(',').map((s) => s.trim()).filter(Boolean).some((s) => !/^type\s/.test(s));
  }).map((m) => m[3]!);
  const bare = [...code.matchAll(/(?:^|[\s;])import\s*['"]([^'"]+)['"]/g), ...code.matchAll(/\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1]!);
  return [...named, ...bare];
}

/** The live adapters and the sandbox provider: they learn decisions through their record keeper (provider-requests.ts). */
const ADAPTERS = ['shared/providers/daraja', 'shared/providers/momo'];
/**
 * The one value the adapters read from the kernel: §18's table of published STK ResultCodes (a lookup of a code's
 * meaning, state-free, shared with the simulator), not a decision about a request.
 */
const ADAPTER_KERNEL_READS = new Set(['shared/providers/daraja/result-codes.ts -> shared/kernel/stk-results.ts']);

/** A SET list that writes a status column: `status`, `payout_status`, a transaction's `refund_status`, ... */
const SETS_A_STATUS = /(^|[\s,(])\w*status\s*=/;

/** Files whose `status` columns are no lifecycle: an idempotency record's is the HTTP status of the answer it stores. */
const NOT_LIFECYCLES = new Set(['shared/db/idempotency-records.ts']);

/**
 * The calls in `code` that move a transaction's status: transition(), transitionAll() or moveRecord() given
 * TRANSACTION_MACHINE as their machine, and any moveTransaction( (the writer beside its decision that apply() replaced).
 */
export function transactionMovesIn(code: string): string[] {
  return [...code.matchAll(/\b(transition|transitionAll|moveRecord)\s*(?:<[^>()]*>)?\s*\(\s*[\w.]+\s*,\s*TRANSACTION_MACHINE\b|\b(moveTransaction)\s*\(/g)].map((m) => m[1] ?? m[2]!);
}

describe('kernel: structure of the sources', () => {
  it('postEntry( is called only by the ledger module and the applier (production code: shared, api, workers, scripts)', () => {
    const callers = ['shared', 'api', 'workers', 'scripts'].flatMap((dir) => sources(join(ROOT, dir)))
      .filter((file) => /\bpostEntry\(/.test(readFileSync(file, 'utf8').replace(/^\s*(\/\/|\*).*$/gm, '')))
      .map((file) => relative(ROOT, file)).sort();
    expect(callers).to.deep.equal(['shared/domain/ledger.ts', 'shared/kernel/apply.ts']);
  });

  it('no status column is written outside the applier (transition.ts, shared/kernel/): every UPDATE and upsert that sets one', () => {
    const writers: string[] = [];
    for (const file of ['shared', 'api', 'workers'].flatMap((dir) => sources(join(ROOT, dir)))) {
      const rel = relative(ROOT, file);
      if (rel === 'shared/domain/transition.ts' || rel.startsWith('shared/kernel/') || NOT_LIFECYCLES.has(rel)) continue;
      const code = uncommented(readFileSync(file, 'utf8'));
      // The SET list of every UPDATE (and ON CONFLICT ... DO UPDATE), up to its WHERE, RETURNING or the string's end.
      for (const [, set] of code.matchAll(/\bUPDATE\b[^`]*?\bSET\b([^`]*?)(?=\bWHERE\b|\bRETURNING\b|\bFROM\b|`)/g)) {
        if (SETS_A_STATUS.test(set!)) writers.push(`${rel}: SET${set!.replace(/\s+/g, ' ').slice(0, 80)}`);
      }
    }
    expect(writers).to.deep.equal([]);
  });

  it('a transaction\'s status is moved only by apply(): no other transition()/transitionAll()/moveRecord() of TRANSACTION_MACHINE, no moveTransaction(', () => {
    const movers = ['shared', 'api', 'workers', 'scripts'].flatMap((dir) => sources(join(ROOT, dir))).flatMap((file) => {
      const rel = relative(ROOT, file);
      if (rel === 'shared/kernel/apply.ts' || rel === 'shared/domain/transition.ts') return [];
      return transactionMovesIn(uncommented(readFileSync(file, 'utf8'))).map((call) => `${rel}: ${call}`);
    });
    expect(movers.sort()).to.deep.equal([]);
  });

  it('the transaction-mover check sees every form of such a call, and none of another machine', () => {
    const text = [
      'await transition(unit, TRANSACTION_MACHINE, { id });', 'await transition<TransactionStatus, TransactionRow>(unit, TRANSACTION_MACHINE, {',
      'transitionAll<S, R>(\n  unit,\n  TRANSACTION_MACHINE, {', 'moveRecord(unit.em, TRANSACTION_MACHINE, {', 'const moved = await moveTransaction(unit, tx, "failed");',
      'await transition(unit, SETTLEMENT_MACHINE, { id });', 'await moveRecord(unit.em, REFUND_MACHINE, {}); const m = TRANSACTION_MACHINE;',
    ].join('\n');
    expect(transactionMovesIn(text)).to.deep.equal(['transition', 'transition', 'transitionAll', 'moveRecord', 'moveTransaction']);
  });

  it('the status-writer check sees every machine\'s column (a transaction\'s refund_status too)', () => {
    expect(MACHINES).to.include(machines.REFUND_MACHINE);
    for (const machine of MACHINES) expect(SETS_A_STATUS.test(` ${machine.column} = $2`), `${machine.table}.${machine.column}`).to.equal(true);
    expect(SETS_A_STATUS.test(' refund = $2, refund_due_at = $3')).to.equal(false);
  });

  it('no money status is kept in JSON any more: no UPDATE writes a provider request\'s outcome or an off-ramp\'s refund', () => {
    // Both are machines now (PROVIDER_REQUEST_MACHINE, REFUND_MACHINE, whose data is written with its status by moveRecord()).
    const writers = ['shared', 'api', 'workers'].flatMap((dir) => sources(join(ROOT, dir))).flatMap((file) => {
      const code = uncommented(readFileSync(file, 'utf8'));
      const found = [...code.matchAll(/\bUPDATE\s+(provider_requests|transactions)\b[^`]*?\bSET\b([^`]*?)(?=\bWHERE\b|\bRETURNING\b|`)/g)]
        .filter(([, table, set]) => new RegExp(`(^|[\\s,])${table === 'transactions' ? 'refund' : 'outcome'}\\s*=`).test(set!));
      return found.map(([, table]) => `${relative(ROOT, file)}: ${table}`);
    });
    expect(writers.sort()).to.deep.equal([]);
  });

  it('the adapters import no value from shared/kernel/ (only types): the record keeper answers their steps', () => {
    const files = [...ADAPTERS.flatMap((dir) => sources(join(ROOT, dir))), join(ROOT, 'shared/providers/sandbox-provider.ts')];
    const found = files.flatMap((file) => valueImportsOf(readFileSync(file, 'utf8')).filter((name) => name.startsWith('.'))
      .map((name) => relative(ROOT, resolve(dirname(file), name.replace(/\.js$/, '.ts'))))
      .filter((target) => target.startsWith('shared/kernel/')).map((target) => `${relative(ROOT, file)} -> ${target}`))
      .filter((edge) => !ADAPTER_KERNEL_READS.has(edge));
    expect(found.sort()).to.deep.equal([]);
  });

  it('the value-import reader skips type-only imports', () => {
    const text = [
      "import type { A } from './a.js';", "import { type B, type C } from './bc.js';", "import { d, type E } from './de.js';", "import f from './f.js';",
      "import * as g from './g.js';", "export { h } from './h.js';", "export type { I } from './i.js';", "import './j.js';", "// import { k } from './k.js';",
    ].join('\n');
    expect(valueImportsOf(text).sort()).to.deep.equal(['./de.js', './f.js', './g.js', './h.js', './j.js']);
  });

  it('shared/ has no import circle (madge --circular)', () => {
    const found = circles(importGraph(sources(join(ROOT, 'shared')))).map((c) => c.map((f) => relative(join(ROOT, 'shared'), f)).join(' <-> '));
    expect(found).to.deep.equal([]);
  });

  it('the import reader sees every form of import, and none in a comment', () => {
    const text = [
      "import { a } from './a.js';", "import type { B } from './b.js';", "import {\n  c,\n  d,\n} from './cd.js';", "export { e } from './e.js';",
      "export * from './f.js';", "import './g.js';", "const h = await import('./h.js');", "// import { x } from './x.js';", "/* import { y } from './y.js'; */",
      "import * as z from './z.js';",
    ].join('\n');
    expect(importsOf(text).sort()).to.deep.equal(['./a.js', './b.js', './cd.js', './e.js', './f.js', './g.js', './h.js', './z.js']);
  });

  it('the circle check finds a circle when there is one (a -> b -> c -> a, and a self-import)', () => {
    expect(circles(new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']]]))).to.deep.equal([['a', 'b', 'c']]);
    expect(circles(new Map([['a', ['a']]]))).to.deep.equal([['a']]);
    expect(circles(new Map([['a', ['b']], ['b', []]]))).to.deep.equal([]);
  });
});
