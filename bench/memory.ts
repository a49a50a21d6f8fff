// npm run bench:memory (and the end of npm run bench): the web process and each worker pool in its own process, as
// the Procfile runs them; three rounds of sandbox off-ramps through the HTTP API, and each process's resident memory
// after every round. Memory that keeps growing round after round is a leak; the first round warms caches and JIT.
import { readFileSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { startProcess, stopProcess, type Started } from '../test/helpers/processes.js';
import { benchEnv, prepareBench, seedBench } from './seed.js';
import { WEB_NODE_FLAGS } from '../shared/web-flags.js';

const PER_ROUND = Number(process.env.BENCH_MEMORY_LIFECYCLES ?? 300);
const ROUNDS = 3;
/** Growth from the second round to the third beyond this share counts as growing. */
const TOLERANCE = 0.1;
const POOLS = ['pricing', 'settlement', 'providers', 'sandbox', 'webhooks'];
const env = benchEnv('rampway-memory', { LOG_LEVEL: 'info' });
const api = 'http://127.0.0.1:3903/api/v1/business';

const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

await prepareBench(env);
const { createDataSource } = await import('../shared/db/data-source.js');
const ds = createDataSource({ poolSize: 2 });
await ds.initialize();

const started: Started[] = [];
try {
  started.push(await startProcess('api/main.ts', { ...env, PORT: '3903' }, 'web listening', [], { nodeArgs: [...WEB_NODE_FLAGS] }));
  for (const pool of POOLS) started.push(await startProcess('workers/main.ts', env, 'workers started', [pool]));
  const seed = await seedBench(api);
  const call = async (method: string, path: string, body?: object) => {
    const res = await fetch(`${api}${path}`, {
      method,
      headers: { Authorization: `Bearer ${seed.key}`, 'Content-Type': 'application/json', 'Idempotency-Key': `mem-${randomUUID()}` },
      body: body ? JSON.stringify(body) : undefined,
    });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Record<string, any>;
  };
  const customer = await call('POST', '/customers', { external_reference: `mem-${randomUUID()}` });
  await call('POST', `/sandbox/wallets/${customer.wallet.id}/fund`, { chain: 'base', amount: String(PER_ROUND * ROUNDS * 30) });

  const samples: number[][] = started.map(() => []);
  for (let round = 1; round <= ROUNDS; round++) {
    const ids: string[] = [];
    let next = 0;
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (next++ < PER_ROUND) {
        const quote = await call('POST', '/quotes', { direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '25', beneficiary_id: seed.beneficiaryId });
        ids.push((await call('POST', '/offramps', { quote_id: quote.id, funding_source: { wallet_id: customer.wallet.id } })).id);
      }
    }));
    for (let waited = 0; ; waited += 250) {
      const [{ n }] = await ds.query(`SELECT count(*)::int AS n FROM transactions WHERE id = ANY($1) AND status IN ('completed', 'failed', 'action_required')`, [ids]);
      if (n === ids.length) break;
      if (waited > 600_000) throw new Error(`round ${round}: ${n}/${ids.length} lifecycles ended after 10 minutes`);
      await new Promise((r) => setTimeout(r, 250));
    }
    // Let each process's idle-time garbage collection run before reading its memory.
    await new Promise((r) => setTimeout(r, 3000));
    started.forEach((s, i) => samples[i].push(rssMb(s.child.pid!)));
    process.stderr.write(`round ${round}/${ROUNDS}: ${ids.length} lifecycles\n`);
  }

  const rows = started.map((s, i) => {
    const [first, second, third] = samples[i];
    const growth = (third - second) / second;
    return { process: s.script === 'api/main.ts' ? 'web' : `worker ${s.args?.[0]}`, rss_mb: samples[i].map((v) => Number(v.toFixed(1))), growth_second_to_third: Number(growth.toFixed(3)), grows: growth > TOLERANCE, first };
  });
  const table = [
    `| process (${PER_ROUND} off-ramps a round) | RSS after round 1 MB | round 2 MB | round 3 MB | round 2 -> 3 | grows |`,
    '|---|---:|---:|---:|---:|---|',
    ...rows.map((r) => `| ${r.process} | ${r.rss_mb[0]} | ${r.rss_mb[1]} | ${r.rss_mb[2]} | ${(r.growth_second_to_third * 100).toFixed(1)}% | ${r.grows ? 'yes' : 'no'} |`),
  ].join('\n');
  process.stdout.write(`${table}\n`);
  const resultsFile = join(import.meta.dirname, 'results.json');
  const results = existsSync(resultsFile) ? JSON.parse(readFileSync(resultsFile, 'utf8')) : {};
  results.memory = { measured_at: new Date().toISOString(), lifecycles_per_round: PER_ROUND, tolerance: TOLERANCE, processes: rows.map(({ first: _first, ...r }) => r) };
  writeFileSync(resultsFile, `${JSON.stringify(results, null, 2)}\n`);
} finally {
  for (const child of started.reverse()) await stopProcess(child);
  await ds.destroy();
}
