// Issue 41's "done when", as an operator meets it: given DATABASE_URL (direct) and DATABASE_CONNECTION_POOL_URL (a
// PgBouncer in transaction mode, its defaults), the release phase and the admin commands connect directly, and
// `npm start` and every Procfile process start through the pooler: PgBouncer's SHOW CLIENTS lists each process (told
// apart by its sockets, not by a count of clients), and its log shows no refused connection. Its own database (a
// fresh one, migrated by the release phase) and Redis prefix. The Procfile's lines run as they are, on the build
// (npm run build: dist/), as a platform runs them. Run by `npm run test:pooler` (test/pooler/run.ts).
import { expect } from 'chai';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { testDatabaseUrl } from '../env.js';
import { startPgbouncer, type Bouncer } from '../helpers/pgbouncer.js';
import { freePort } from '../helpers/processes.js';
import { until } from '../helpers/until.js';

/** Lines in PgBouncer's log that mean it refused or dropped something of ours. */
const REFUSED = /unsupported startup parameter|pooler error|FATAL|ERROR|prepared statement/;

interface Child {
  name: string;
  proc: ChildProcess;
  out: () => string;
  exit: Promise<number | null>;
}

function start(name: string, command: string, args: string[], env: NodeJS.ProcessEnv): Child {
  const proc = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: command === 'npm' });
  let out = '';
  const keep = (d: Buffer) => { out = (out + d).slice(-100_000); };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  const exit = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return { name, proc, out: () => out, exit };
}

/** Runs a one-off command line to its end: its exit code and output. */
async function once(line: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string }> {
  const [command, ...args] = line.split(/\s+/);
  const child = start(line, command, args, env);
  const code = await child.exit;
  return { code, out: child.out() };
}

/** The Procfile's processes by name, each its command line. */
const procfile = (): [string, string][] =>
  readFileSync('Procfile', 'utf8').trim().split('\n').map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]);

async function stopAll(children: Child[]): Promise<void> {
  await Promise.all(children.map(async (c) => {
    if (c.proc.exitCode !== null || c.proc.signalCode !== null) return;
    const timer = setTimeout(() => c.proc.kill('SIGKILL'), 15_000);
    // npm start leads its own process group (detached): the signal reaches it and nothing else.
    c.proc.kill('SIGTERM');
    await c.exit;
    clearTimeout(timer);
  }));
}

/** Every process below `pid`, by parent pid. */
function descendants(pid: number): number[] {
  const out = spawnSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' }).stdout;
  return out.split('\n').map((l) => l.trim()).filter(Boolean).map(Number).flatMap((p) => [p, ...descendants(p)]);
}

const cmdline = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
};

describe('npm start and the Procfile processes through PgBouncer (transaction mode, its defaults); migrations and admin direct', function () {
  this.timeout(300_000);
  const fresh = new URL(testDatabaseUrl());
  fresh.pathname = `/rampway_pooler_${process.pid}`;
  const admin = new URL(testDatabaseUrl());
  admin.pathname = '/postgres';
  let bouncer: Bouncer;
  let env: NodeJS.ProcessEnv;
  const running: Child[] = [];

  before(async () => {
    execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'ignore' }); // the Procfile runs dist/
    const client = new pg.Client({ connectionString: admin.toString() });
    await client.connect();
    await client.query(`DROP DATABASE IF EXISTS "${fresh.pathname.slice(1)}" WITH (FORCE)`);
    await client.query(`CREATE DATABASE "${fresh.pathname.slice(1)}"`);
    await client.end();
    bouncer = await startPgbouncer(fresh.toString());
    env = {
      ...process.env,
      LOG_LEVEL: 'info',
      DATABASE_URL: fresh.toString(),
      DATABASE_CONNECTION_POOL_URL: bouncer.url,
      REDIS_PREFIX: `${process.env.REDIS_PREFIX}-procfile`,
    };
  });
  afterEach(async () => {
    await stopAll(running.splice(0));
  });
  after(async () => {
    await bouncer?.stop();
    const client = new pg.Client({ connectionString: admin.toString() });
    await client.connect();
    await client.query(`DROP DATABASE IF EXISTS "${fresh.pathname.slice(1)}" WITH (FORCE)`);
    await client.end();
  });

  /** Waits until PgBouncer lists a client of each of `pids`; the web process is asked for a read first each time. */
  async function expectListed(pids: Record<string, number>, port: string): Promise<void> {
    let listed: number[] = [];
    await until(async () => {
      await fetch(`http://127.0.0.1:${port}/ready`).catch(() => undefined);
      listed = await bouncer.listedPids(Object.values(pids));
      return listed.length === Object.keys(pids).length;
    }, {
      timeoutMs: 60_000, everyMs: 250, what: 'SHOW CLIENTS listing every process',
      describe: () => Object.entries(pids).filter(([, pid]) => !listed.includes(pid)).map(([name]) => `${name} not listed`),
    });
  }

  it('the release phase (the Procfile\'s release line) and an admin command connect directly: PgBouncer sees no login', async () => {
    const release = procfile().find(([name]) => name === 'release')![1];
    const migrate = await once(release, env);
    expect(migrate.code, migrate.out).to.equal(0);
    expect(migrate.out).to.match(/applied: /);
    // `npm run admin` as production runs it (dist/scripts/admin.js).
    const business = await once('node --enable-source-maps dist/scripts/admin.js create-business --name Pooler --json', { ...env, LOG_LEVEL: 'silent' });
    expect(business.code, business.out).to.equal(0);
    expect(business.out).to.include('svc_test_');
    expect(bouncer.log()).not.to.match(/login attempt/);
  });

  it('npm start, given both URLs, starts: SHOW CLIENTS lists its web, worker and settlement processes, and PgBouncer refused nothing', async () => {
    const port = String(await freePort());
    const npm = start('npm start', 'npm', ['start'], { ...env, PORT: port });
    running.push(npm);
    await until(() => npm.proc.exitCode === null ? (npm.out().match(/workers started/g) ?? []).length >= 2 && npm.out().includes('web listening') : Promise.reject(new Error(`npm start exited: ${npm.out()}`)), { timeoutMs: 180_000, everyMs: 250, what: 'npm start ready', describe: () => npm.out().slice(-3000) });
    const tree = descendants(npm.proc.pid!);
    const find = (part: string) => tree.find((pid) => cmdline(pid).includes(part));
    const pids = { web: find('api/main.ts'), worker: find('workers/main.ts pricing'), settlement: find('workers/main.ts settlement') };
    expect(Object.values(pids).every((p) => typeof p === 'number'), JSON.stringify(pids)).to.equal(true);
    await expectListed(pids as Record<string, number>, port);
    expect(bouncer.log().split('\n').filter((l) => REFUSED.test(l))).to.deep.equal([]);
    await stopAll(running.splice(0));
    expect(npm.out()).to.include('web stopped').and.to.include('workers stopped');
    // Nothing it started outlives it (a zombie's command line is empty: it has ended).
    await until(() => tree.every((pid) => cmdline(pid) === ''), { timeoutMs: 20_000, everyMs: 100, what: 'npm start\'s processes gone' });
    expect(bouncer.log().split('\n').filter((l) => REFUSED.test(l))).to.deep.equal([]);
  });

  it('every process of the Procfile starts through it: SHOW CLIENTS lists web, worker and each pool, and PgBouncer refused nothing', async () => {
    // The Procfile's own lines, as they are.
    const port = String(await freePort());
    const processes = procfile().filter(([name]) => name !== 'release').map(([name, line]) => {
      const [command, ...args] = line.split(/\s+/);
      return start(name, command, args, { ...env, PORT: port });
    });
    running.push(...processes);
    expect(processes.map((p) => p.name)).to.deep.equal(['web', 'worker', 'pricing', 'settlement', 'providers', 'sandbox', 'webhooks']);
    await until(() => {
      const gone = processes.find((p) => p.proc.exitCode !== null);
      if (gone) throw new Error(`${gone.name} exited: ${gone.out().slice(-2000)}`);
      return processes.every((p) => p.out().includes(p.name === 'web' ? 'web listening' : 'workers started'));
    }, {
      timeoutMs: 180_000, everyMs: 250, what: 'every Procfile process ready',
      describe: () => processes.map((p) => `${p.name}: ${p.out().slice(-600)}`),
    });
    await expectListed(Object.fromEntries(processes.map((p) => [p.name, p.proc.pid!])), port);
    expect(bouncer.log().split('\n').filter((l) => REFUSED.test(l))).to.deep.equal([]);
    await stopAll(running.splice(0));
    for (const p of processes) expect(await p.exit, `${p.name}: ${p.out().slice(-2000)}`).to.equal(0);
    expect(bouncer.log().split('\n').filter((l) => REFUSED.test(l))).to.deep.equal([]);
  });
});
