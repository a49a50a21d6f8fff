// The end of npm run bench: every goal, its figure and met or not, read from bench/results.json as this run's
// benchmarks wrote it. A figure older than the run (its benchmark was skipped, or failed before writing) is shown with
// its date and counted as not met, so a run never passes on an old figure.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

interface Goal {
  name: string;
  goal: string;
  figure: string;
  met: boolean;
  measured_at?: string;
}

const results = JSON.parse(readFileSync(join(import.meta.dirname, 'results.json'), 'utf8'));
// bench/run.ts, the first of the run, notes when the run began.
const since = Date.parse(process.env.BENCH_SINCE ?? results.bench_started_at ?? 0);

const goals: Goal[] = [];
for (const row of results.results ?? []) {
  if (!row.goal) continue;
  const figure = row.goal.includes('/s') ? `${row.rps}/s, p99 ${row.p99_ms} ms` : row.name.includes(' at ') ? `p99 ${row.p99_ms} ms` : `${row.ratio}x`;
  goals.push({ name: row.name, goal: row.goal, figure, met: row.met, measured_at: results.measured_at });
}
for (const [key, section] of Object.entries<any>(results)) {
  if (!key.startsWith('pipeline_client') || !section.goals) continue;
  for (const g of section.goals) {
    goals.push({ name: `${g.name} (${key})`, goal: g.goal, figure: g.figure === null ? 'not measured' : String(g.figure), met: g.met, measured_at: section.measured_at });
  }
}
if (results.scan) {
  goals.push({ name: 'settlement scan: 10,000 open addresses against 10', goal: `<= ${results.scan.goal_ratio}x`, figure: `${results.scan.ratio}x`, met: results.scan.ratio <= results.scan.goal_ratio, measured_at: results.scan.measured_at });
}
if (results.memory) {
  const grows = results.memory.processes.filter((p: { grows: boolean }) => p.grows).map((p: { process: string }) => p.process);
  goals.push({ name: 'memory over three pipeline rounds', goal: 'no process grows', figure: grows.length ? `grows: ${grows.join(', ')}` : 'none grows', met: !grows.length, measured_at: results.memory.measured_at });
}
if (results.csv_export) {
  goals.push({ name: 'CSV export of 100,000 transactions', goal: 'flat memory', figure: results.csv_export.flat ? 'flat' : 'not flat', met: results.csv_export.flat, measured_at: results.csv_export.measured_at });
}
if (results.payout_batch) {
  const b = results.payout_batch;
  goals.push({ name: `a payout batch of ${b.items} accepted`, goal: `<= ${b.goal_accept_ms} ms`, figure: `${b.accept_ms_median} ms`, met: b.met, measured_at: b.measured_at });
}
// Issue 39: every figure again beside a million transactions of another tenant (BENCH_VOLUME=1), within 15% of the
// same figure on an empty database.
const volumes = Object.keys(results).filter((key) => key.startsWith('pipeline_client') && key.endsWith('_volume') && results[key.replace(/_volume$/, '')]);
for (const key of volumes) {
  const [full, empty] = [results[key], results[key.replace(/_volume$/, '')]];
  const ratio = full.lifecycles_per_second / empty.lifecycles_per_second;
  const older = Date.parse(full.measured_at) < Date.parse(empty.measured_at) ? full : empty;
  goals.push({ name: `lifecycles/s with a million transactions against empty (${key})`, goal: '>= 0.85x', figure: `${ratio.toFixed(2)}x`, met: ratio >= 0.85, measured_at: older.measured_at });
}
if (!volumes.length) goals.push({ name: 'every figure with a million transactions in the database', goal: 'within 15% of empty', figure: 'not measured', met: false });

const fresh = (g: Goal) => g.measured_at !== undefined && Date.parse(g.measured_at) >= since;
const width = Math.max(...goals.map((g) => g.name.length));
const lines = goals.map((g) => {
  const met = fresh(g) ? (g.met ? 'met' : 'NOT MET') : `NOT MET (not measured in this run; last ${g.measured_at ?? 'never'})`;
  return `  ${g.name.padEnd(width)}  ${g.goal.padEnd(26)}  ${g.figure.padStart(22)}  ${met}`;
});
const met = goals.filter((g) => fresh(g) && g.met).length;
process.stdout.write(`\nevery goal (bench/results.json):\n${lines.join('\n')}\n${met} of ${goals.length} goals met in this run\n`);
