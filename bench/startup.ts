// npm run bench:startup: a web dyno's time from start to its first answered request, and its memory at rest, run as
// development runs it (node --import tsx api/main.ts, the sources compiled in memory) and as production runs it (the
// Procfile's node dist/api/main.js with its flags, after npm run build). Each way RUNS times, alternating; the medians go into
// docs/performance.md. Needs local PostgreSQL (migrated: npm run migrate) and Redis; builds dist/ first.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { WEB_NODE_FLAGS } from '../shared/web-flags.js';

const RUNS = Number(process.env.RUNS ?? 7);
const PORT = 24000 + (process.pid % 1000);
const WAYS = { tsx: ['--import', 'tsx', ...WEB_NODE_FLAGS, 'api/main.ts'], dist: ['--enable-source-maps', ...WEB_NODE_FLAGS, 'dist/api/main.js'] } as const;

execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'ignore' });

const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

async function once(args: readonly string[]): Promise<{ firstMs: number; restMb: number; firstRequestMb: number }> {
  const started = performance.now();
  const child = spawn(process.execPath, args, { env: { ...process.env, PORT: String(PORT), LOG_LEVEL: 'warn', REDIS_PREFIX: `bench-startup-${process.pid}` }, stdio: 'ignore' });
  try {
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${PORT}/health`).then((r) => r.ok, () => false);
      if (ok) break;
      if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited with ${child.exitCode}`);
      if (performance.now() - started > 60_000) throw new Error('no answer within 60 s');
      await sleep(10);
    }
    const firstMs = performance.now() - started;
    const firstRequestMb = rssMb(child.pid!);
    await sleep(10_000); // at rest: no request for 10 s
    return { firstMs, firstRequestMb, restMb: rssMb(child.pid!) };
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)));
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results: Record<string, { firstMs: number[]; restMb: number[] }> = { tsx: { firstMs: [], restMb: [] }, dist: { firstMs: [], restMb: [] } };
for (let i = 0; i < RUNS; i++) {
  for (const [way, args] of Object.entries(WAYS)) {
    const r = await once(args);
    results[way].firstMs.push(r.firstMs);
    results[way].restMb.push(r.restMb);
  }
}
for (const [way, r] of Object.entries(results)) {
  process.stdout.write(`${way.padEnd(4)}  first answer: median ${median(r.firstMs).toFixed(0)} ms (min ${Math.min(...r.firstMs).toFixed(0)}, max ${Math.max(...r.firstMs).toFixed(0)}); ` +
    `RSS at rest: median ${median(r.restMb).toFixed(1)} MB (min ${Math.min(...r.restMb).toFixed(1)}, max ${Math.max(...r.restMb).toFixed(1)})\n`);
}
