// npm run bench:cpu: where one request's CPU goes, process by process. Starts the service as bench/run.ts does (web
// and every pool, own database and Redis prefix) beside the hello world, then loads each chosen scenario for
// BENCH_SECONDS and reads every process's CPU time from /proc before and after: the web process, the worker pools,
// PostgreSQL's backends, Redis and the load generator (this process), each as CPU microseconds per request.
// BENCH_ONLY=<regex> chooses the scenarios (names as below); BENCH_PROFILE_DIR=<dir> profiles the web process.
import { readFileSync, readdirSync } from 'node:fs';
import autocannon from 'autocannon';
import { startProcess, stopProcess, type Started } from '../test/helpers/processes.js';
import { benchEnv, prepareBench, seedBench, uniqueWrites } from './seed.js';
import { WEB_NODE_FLAGS } from '../shared/web-flags.js';

const DURATION = Number(process.env.BENCH_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ONLY = process.env.BENCH_ONLY ? new RegExp(process.env.BENCH_ONLY) : null;
const env = benchEnv('rampway-bench');
const TICK_US = 1_000_000 / 100; // USER_HZ

/** utime + stime of a process, in microseconds (0 when it is gone). */
function cpuOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_US;
  } catch {
    return 0;
  }
}

/** Every process whose command line matches, by pid. */
function pidsOf(match: (cmd: string, comm: string) => boolean): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
      const comm = readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
      if (match(cmd, comm)) pids.push(Number(entry));
    } catch { /* gone */ }
  }
  return pids;
}

/** The process and all its descendants. */
function treeOf(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch { /* gone */ }
  }
  const out = [root];
  for (let i = 0; i < out.length; i++) out.push(...(children.get(out[i]) ?? []));
  return out;
}

const sum = (pids: number[]) => pids.reduce((s, p) => s + cpuOf(p), 0);
const selfCpu = () => { const u = process.cpuUsage(); return u.user + u.system; };

await prepareBench(env);
const started: Started[] = [];
try {
  const hello = await startProcess('bench/hello.ts', { ...env, PORT: '3901' }, 'listening');
  started.push(hello);
  // BENCH_PROFILE_DIR=<dir>: the web process writes a V8 CPU profile there when it stops (node --cpu-prof).
  const nodeArgs = process.env.BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [];
  const web = await startProcess('api/main.ts', { ...env, PORT: '3902' }, 'web listening', [], { nodeArgs: [...WEB_NODE_FLAGS, ...nodeArgs] });
  started.push(web);
  const workers = await startProcess('workers/main.ts', env, 'workers started');
  started.push(workers);
  const api = 'http://127.0.0.1:3902/api/v1/business';
  const seed = await seedBench(api);
  const auth = { headers: { Authorization: `Bearer ${seed.key}` } };
  const scenarios: { name: string; url: string; opts?: Partial<autocannon.Options>; target: Started }[] = [
    { name: 'hello world', url: 'http://127.0.0.1:3901/', target: hello },
    { name: 'GET /account', url: `${api}/account`, opts: auth, target: web },
    { name: 'GET /customers/{id}', url: `${api}/customers/${seed.customerId}`, opts: auth, target: web },
    { name: 'GET /transactions/{id}', url: `${api}/transactions/${seed.transactionId}`, opts: auth, target: web },
    { name: 'GET /customers (a page of 25)', url: `${api}/customers?limit=25`, opts: auth, target: web },
    { name: 'GET /transactions (a page of 25)', url: `${api}/transactions?limit=25`, opts: auth, target: web },
    { name: 'POST /customers', url: api, opts: uniqueWrites(seed.key, '/api/v1/business/customers', (id) => ({ external_reference: `cpu-${id}` })), target: web },
    {
      name: 'POST /quotes', url: api, target: web, opts: uniqueWrites(seed.key, '/api/v1/business/quotes', () => ({
        direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '25', beneficiary_id: seed.beneficiaryId,
      })),
    },
  ];
  const groups = {
    web: () => treeOf(web.child.pid!),
    hello: () => treeOf(hello.child.pid!),
    workers: () => treeOf(workers.child.pid!),
    postgres: () => pidsOf((_cmd, comm) => comm === 'postgres'),
    redis: () => pidsOf((_cmd, comm) => comm === 'redis-server'),
  };
  const lines: string[] = [];
  for (const s of scenarios.filter((x) => !ONLY || ONLY.test(x.name))) {
    await autocannon({ url: s.url, connections: CONNECTIONS, duration: 2, ...s.opts }); // warm-up
    const pids = Object.fromEntries(Object.entries(groups).map(([k, f]) => [k, f()]));
    const before = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, sum(p)]));
    const self0 = selfCpu();
    const result = await autocannon({ url: s.url, connections: CONNECTIONS, duration: DURATION, ...s.opts });
    const self = selfCpu() - self0;
    const n = result.requests.total;
    const per = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, Math.round((sum(p) - before[k]) / n)]));
    const total = Object.values(per).reduce((a, b) => a + b, 0) + Math.round(self / n);
    lines.push(`| ${s.name} | ${Math.round(result.requests.average)} | ${per.web + per.hello} | ${per.postgres} | ${per.redis} | ${per.workers} | ${Math.round(self / n)} | ${total} | ${result.non2xx + result.errors} |`);
  }
  process.stdout.write([
    `CPU per request in microseconds (${CONNECTIONS} connections, ${DURATION} s):`,
    '| scenario | req/s | server (web or hello) | PostgreSQL | Redis | worker pools | load generator | all | failed |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...lines,
  ].join('\n') + '\n');
} finally {
  for (const child of started.reverse()) await stopProcess(child);
}
