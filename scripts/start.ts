// npm start: the one-machine default. Checks PostgreSQL and Redis, creates the database if absent,
// applies migrations, then runs the web process and every worker pool, restarting nothing silently.
// Each process gets only the keys it needs: the settlement pool the seeds, the others their public keys alone.
// SIGTERM or SIGINT reaches every child once; it exits when they all have, and no child outlives it.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { configureFor, getConfig, holdWalletSeeds, type Config } from '../shared/config.js';
import { needsOf } from '../shared/config-processes.js';
import { POOLS } from '../shared/queues/registry.js';
import { WEB_NODE_FLAGS } from '../shared/web-flags.js';
import { createDataSource, runMigrations } from '../shared/db/data-source.js';
import { ensureDatabase, ensureRedis, PreflightError } from './preflight.js';

const say = (line: string) => process.stderr.write(`npm start: ${line}\n`);

/**
 * The processes that launched this one, up to npm: npm -> tsx -> this (the start script execs tsx, so npm's SIGINT and
 * SIGTERM reach tsx, which passes them on), or npm -> sh -c -> tsx -> this elsewhere: sh dies of the SIGTERM npm forwards
 * without passing it on, so nothing would ever signal this process: it watches them instead. Not under npm, or
 * without `ps`: the parent only.
 */
function launchers(): number[] {
  if (!process.env.npm_lifecycle_event) return [process.ppid];
  const ps = (pid: number) => execFileSync('ps', ['-o', 'ppid=,args=', '-p', String(pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  const chain: number[] = [];
  try {
    for (let pid = process.ppid; chain.length < 5; ) {
      chain.push(pid);
      const [, ppid, args] = /^(\d+)\s+(.*)$/.exec(ps(pid).trim()) ?? [];
      if (!ppid) break;
      if (/(^|[\s/])npm(-cli\.js)?(\s|$)/.test(args)) return chain;
      pid = Number(ppid);
    }
  } catch {
    // no ps (a slim image): the parent is all there is to watch
  }
  return [process.ppid];
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

// It hands the seeds to the settlement pool, and their public keys to the others: it reads them (and checks any
// WALLET_XPUB given beside them).
holdWalletSeeds();
configureFor(needsOf(['web', ...POOLS]), 'npm start');
const config = getConfig();
const parentPid = process.ppid;
const watched = launchers();
/** The pid of a launcher that is gone, or null. */
const goneLauncher = () => (process.ppid !== parentPid ? parentPid : watched.find((pid) => !alive(pid)) ?? null);

try {
  await ensureDatabase(config.databaseUrl);
  await ensureRedis(config.redisUrl);
} catch (err) {
  process.stderr.write(`cannot start: ${err instanceof PreflightError ? err.message : String(err)}\n`);
  process.exit(1);
}
const ds = createDataSource({ poolSize: 2, statementTimeoutMs: 0 });
await ds.initialize();
await runMigrations(ds);
await ds.destroy();
if (goneLauncher() !== null) {
  say(`the process that started it (pid ${goneLauncher()}) is gone; not starting anything`);
  process.exit(1);
}

// Loaded into each child: when this process is gone, even killed by SIGKILL (which no handler sees), the child's IPC
// pipe closes and it sends itself SIGTERM, draining as usual. Unref'd, so the pipe never keeps a child alive.
const ORPHAN_GUARD = `data:text/javascript,${encodeURIComponent(
  "process.on('disconnect', () => process.kill(process.pid, 'SIGTERM')); process.channel?.unref();",
)}`;
// Children get this long past their own drain limit (SHUTDOWN_TIMEOUT_MS) before they are killed.
const KILL_GRACE_MS = 5_000;

/** The environment of a process that signs nothing: no seed, the public keys derived from them instead. */
function withoutSeeds(env: NodeJS.ProcessEnv, wallets: Config['wallets']): NodeJS.ProcessEnv {
  const { WALLET_SEED: _sandbox, WALLET_SEED_LIVE: _live, ...rest } = env;
  const keys = (suffix: string, wallet: Config['wallets']['sandbox'] | null) =>
    wallet ? { [`WALLET_XPUB${suffix}`]: wallet.xpub, [`WALLET_TREASURY_ADDRESS${suffix}`]: wallet.treasuryAddress } : {};
  return { ...rest, ...keys('', wallets.sandbox), ...keys('_LIVE', wallets.live) };
}
const publicOnly = withoutSeeds(process.env, config.wallets);

// Compiled (node dist/scripts/start.js, as `npm start` runs with NODE_ENV=production) the children run dist/'s
// JavaScript with source maps; under tsx (development), the TypeScript sources through tsx's loader.
const compiled = import.meta.url.endsWith('.js');
const entry = (path: string) => join(import.meta.dirname, '..', `${path}.${compiled ? 'js' : 'ts'}`);
const loader = compiled ? ['--enable-source-maps'] : ['--import', 'tsx'];

const PROCESSES: [name: string, args: string[], env: NodeJS.ProcessEnv][] = [
  ['web', [...WEB_NODE_FLAGS, entry('api/main')], publicOnly],
  ['worker', [entry('workers/main'), POOLS.filter((pool) => pool !== 'settlement').join(',')], publicOnly],
  // The one process that signs (deposit sweeps, off-ramp funding, treasury sends).
  ['settlement', [entry('workers/main'), 'settlement'], process.env],
];

// node itself (tsx as its loader in development): no wrapper process to swallow a signal. Detached, each child leads
// its own process group: a terminal's Ctrl-C reaches it once, through stop(), and a signal to the group reaches all it starts.
const children = PROCESSES.map(([name, args, env]) => ({
  name,
  // CPU_PROFILE_DIR: each process writes a V8 CPU profile there when it stops (docs/performance.md reads them).
  proc: spawn(process.execPath, [...loader, '--import', ORPHAN_GUARD, ...(process.env.CPU_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.CPU_PROFILE_DIR}`] : []), ...args], {
    env,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    detached: true,
  }),
  exited: false,
}));

let stopping = false;
let failed = false;
const running = () => children.filter((c) => !c.exited);
const names = (list: { name: string }[]) => list.map((c) => c.name).join(' and ') || 'nothing';

function signal(proc: ChildProcess, sig: NodeJS.Signals): void {
  if (proc.pid === undefined) return;
  try {
    process.kill(-proc.pid, sig);
  } catch {
    proc.kill(sig); // the group is gone (or never formed): the process itself, if it is still there
  }
}

function stop(sig: NodeJS.Signals): void {
  if (stopping) return;
  stopping = true;
  for (const child of running()) signal(child.proc, sig);
  setTimeout(() => {
    say(`${names(running())} still running ${config.shutdownTimeoutMs + KILL_GRACE_MS} ms after ${sig}; killing`);
    failed = true;
    for (const child of running()) signal(child.proc, 'SIGKILL');
  }, config.shutdownTimeoutMs + KILL_GRACE_MS).unref();
}

function exited(child: (typeof children)[number], how: string, ok: boolean): void {
  if (child.exited) return;
  child.exited = true;
  if (!stopping) {
    failed = true;
    say(`${child.name} (pid ${child.proc.pid ?? 'none'}) ${how}; stopping ${names(running())}`);
    stop('SIGTERM');
  } else if (!ok) {
    failed = true;
    say(`${child.name} (pid ${child.proc.pid}) ${how} while stopping`);
  }
  if (running().length === 0) process.exit(failed ? 1 : 0);
}

for (const child of children) {
  child.proc.on('exit', (code, sig) => exited(child, sig ? `was killed by ${sig}` : `exited with code ${code}`, code === 0));
  child.proc.on('error', (err) => {
    if (child.proc.pid === undefined) exited(child, `could not start (${err.message})`, false);
  });
}

// One plain line once the service answers /ready: where it is, where its reference is, how to stop it.
const local = `http://localhost:${config.port}`;
let announced = false;
const readyCheck = setInterval(async () => {
  if (stopping || announced) return clearInterval(readyCheck);
  const ready = await fetch(`http://127.0.0.1:${config.port}/ready`, { signal: AbortSignal.timeout(1_000) }).then((r) => r.ok, () => false);
  if (!ready || stopping || announced) return;
  announced = true;
  clearInterval(readyCheck);
  say(`ready: the API at ${local}/api/v1/business, its reference at ${local}/docs (Ctrl-C stops it)`);
}, 250);
readyCheck.unref();

process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
// The children handle SIGTERM and SIGINT only: a closed terminal drains them like a SIGTERM.
process.on('SIGHUP', () => stop('SIGTERM'));
setInterval(() => {
  const gone = goneLauncher();
  if (stopping || gone === null) return;
  say(`the process that started it (pid ${gone}) is gone; stopping ${names(running())}`);
  stop('SIGTERM');
}, 500).unref();
