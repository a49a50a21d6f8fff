// The fault-injection run (`npm run test:faults`): many lifecycles of every kind on the live rails (Anvil + the
// Daraja stand-in) and the sandbox, while a seeded schedule injects RPC, chain, provider, callback, Redis and process
// faults; then every invariant of invariants.ts must hold. FAULT_SEED replays a run; FAULT_SEEDS=n runs n seeds in a
// row (from FAULT_SEED, or a random one); FAULT_LIFECYCLES and FAULT_MS size each run,
// FAULT_QUIESCE_MS and FAULT_EXIT_MS bound the wait for quiescence and for the exits operated after it.
import { expect } from 'chai';
import { printReport, runFaults, type RunReport } from './run.js';

const FIRST = process.env.FAULT_SEED ? Number(process.env.FAULT_SEED) : Math.floor(Math.random() * 2 ** 31);
const SEEDS = Number(process.env.FAULT_SEEDS ?? 1);
const LIFECYCLES = Number(process.env.FAULT_LIFECYCLES ?? 20);
const FAULT_MS = Number(process.env.FAULT_MS ?? 45_000);
const QUIESCE_MS = Number(process.env.FAULT_QUIESCE_MS ?? 60_000);
const EXIT_MS = Number(process.env.FAULT_EXIT_MS ?? 30_000);
const log = (line: string) => console.log(`      ${line.replace(/\n/g, '\n      ')}`);

describe(`fault injection: ${SEEDS} seed(s) from ${FIRST}, ${LIFECYCLES} lifecycles each`, function () {
  this.timeout(0);
  for (let i = 0; i < SEEDS; i++) {
    const seed = (FIRST + i) % 2 ** 31;
    it(`seed ${seed}: every invariant holds`, async () => {
      const report: RunReport = await runFaults(seed, { lifecycles: LIFECYCLES, faultMs: FAULT_MS, quiesceMs: QUIESCE_MS, exitMs: EXIT_MS, log });
      printReport(report, log);
      const violated = report.verdicts.filter((v) => !v.held).map((v) => `${v.name}: ${v.examples[0]}`);
      expect(violated, `invariants violated (seed ${seed}; FAULT_SEED=${seed} replays)`).to.deep.equal([]);
    });
  }
});
