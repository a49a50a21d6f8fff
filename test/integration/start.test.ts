import { expect } from 'chai';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { testDatabaseUrl } from '../env.js';
import { until } from '../helpers/until.js';
import { accountXpub, treasuryAddress } from '../../shared/chain/hd-wallet.js';
import { DEV_SEED_SANDBOX as DEV_SEED } from '../../shared/config-wallets.js';

// Node itself with tsx's loader, as npm start runs each process: the tsx command would relay a signal to the process it
// starts, and SIGKILL it (exit 143) when it does not acknowledge within 30 ms, which a busy machine can miss.
const TSX_NODE = ['--import', 'tsx'];

function run(script: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [...TSX_NODE, script], { env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d) => (out.stdout += d));
  child.stderr.on('data', (d) => (out.stderr += d));
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, out, exit };
}

/** true once `check` holds within `ms` (a failing check counts as not yet), false after. */
const within = (check: () => Promise<boolean>, ms: number): Promise<boolean> =>
  until(() => check().catch(() => false), { timeoutMs: ms, everyMs: 100 }).catch(() => false);

// The README's command itself, in its own session (as a terminal runs a job) so a test can press Ctrl-C on it.
function npmStart(env: Record<string, string>) {
  const child = spawn('npm', ['start'], { env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d) => (out.stdout += d));
  child.stderr.on('data', (d) => (out.stderr += d));
  const exit = new Promise<{ code: number | null; signal: string | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  // Every process holding the output (npm's children too) has closed it: all of them have ended.
  const closed = new Promise<void>((resolve) => child.stdout.on('close', resolve));
  return { pid: child.pid!, out, exit, closed };
}

const ps = (...args: string[]) => spawnSync('ps', args, { encoding: 'utf8' }).stdout.trim();

/** Every process below `pid`, by parent pid, recursively. */
function descendants(pid: number): number[] {
  return ps('-o', 'pid=', '--ppid', String(pid)).split('\n').filter(Boolean).map(Number).flatMap((p) => [p, ...descendants(p)]);
}

/** Those of `pids` still running (a zombie has ended: only its exit status waits for a reaper). */
function running(pids: number[]): number[] {
  return ps('-o', 'pid=,stat=', '-p', pids.join(',')).split('\n').filter(Boolean).map((l) => l.trim().split(/\s+/))
    .filter(([, stat]) => !stat.startsWith('Z')).map(([pid]) => Number(pid));
}

const commandOf = (pid: number) => ps('-o', 'args=', '-p', String(pid));

describe('npm start on a fresh database (the newcomer path)', function () {
  this.timeout(90_000);
  const fresh = new URL(testDatabaseUrl());
  fresh.pathname = `/rampway_start_${process.pid}`;
  const admin = new URL(testDatabaseUrl());
  admin.pathname = '/postgres';

  after(async () => {
    const client = new pg.Client({ connectionString: admin.toString() });
    await client.connect();
    await client.query(`DROP DATABASE IF EXISTS "${fresh.pathname.slice(1)}" WITH (FORCE)`);
    await client.end();
  });

  // npm start's own settings: its own database, port and Redis prefix (its workers must not take this run's jobs).
  const SHUTDOWN_MS = 10_000;
  const BUDGET_MS = SHUTDOWN_MS + 2_000;
  const startEnv = () => ({ DATABASE_URL: fresh.toString(), PORT: String(20000 + (process.pid % 20000)), REDIS_PREFIX: `${process.env.REDIS_PREFIX}-start`, SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_MS) });
  let tree: number[] = [];
  afterEach(() => {
    for (const pid of running(tree)) process.kill(pid, 'SIGKILL'); // a failed test leaves nothing behind either
    tree = [];
  });

  /** Starts `npm start`, waits until it serves and its workers run, and returns it with every process it started. */
  async function startAll(env: Record<string, string> = {}) {
    const started = npmStart({ ...startEnv(), ...env });
    const up = await within(async () => (await fetch(`http://127.0.0.1:${startEnv().PORT}/ready`)).status === 200 && started.out.stdout.includes('workers started'), 60_000);
    expect(up, started.out.stderr + started.out.stdout).to.equal(true);
    tree = [started.pid, ...descendants(started.pid)];
    const find = (part: string) => tree.find((pid) => commandOf(pid).includes(part));
    const pids = { web: find('api/main.ts'), worker: find('workers/main.ts pricing'), settlement: find('workers/main.ts settlement'), start: find('preflight.cjs') };
    expect(pids.web, 'web process').to.be.a('number');
    expect(pids.worker, 'worker process').to.be.a('number');
    expect(pids.settlement, 'settlement worker process').to.be.a('number');
    expect(pids.start, 'scripts/start.ts process').to.be.a('number');
    return { ...started, pids: pids as Record<keyof typeof pids, number> };
  }

  /** Within the shutdown budget: npm start has exited and not one process it started is running. */
  async function allGone(started: { exit: Promise<unknown>; closed: Promise<void> }, since: number) {
    const timeout = new Promise((resolve) => setTimeout(() => resolve('timeout'), BUDGET_MS).unref());
    expect(await Promise.race([started.exit.then(() => 'exited'), timeout]), 'npm start exited').to.equal('exited');
    expect(await within(async () => running(tree).length === 0, BUDGET_MS - (Date.now() - since)), `still running: ${running(tree).map(commandOf).join('; ')}`).to.equal(true);
    await started.closed;
  }

  it('creates the database, migrates, serves web and workers, and SIGTERM to npm start drains them all, leaving no process', async () => {
    const started = await startAll();
    const tables = new pg.Client({ connectionString: fresh.toString() });
    await tables.connect();
    const { rows } = await tables.query(`SELECT count(*)::int AS n FROM schema_migrations`);
    await tables.end();
    expect(rows[0].n).to.be.at.least(1);
    // The ready line says where the API and its reference are.
    const local = `http://localhost:${startEnv().PORT}`;
    expect(await within(async () => started.out.stderr.includes('npm start: ready'), 5_000), started.out.stderr).to.equal(true);
    expect(started.out.stderr).to.include(`npm start: ready: the API at ${local}/api/v1/business, its reference at ${local}/docs (Ctrl-C stops it)`);
    expect(started.out.stderr.match(/npm start: ready/g), 'said once').to.have.length(1);
    const listening = started.out.stdout.split('\n').find((l) => l.includes('"web listening"'))!;
    expect(JSON.parse(listening)).to.include({ url: `${local}/api/v1/business`, docs: `${local}/docs` });
    expect((await fetch(`http://127.0.0.1:${startEnv().PORT}/docs`)).status).to.equal(200);

    const since = Date.now();
    process.kill(started.pid, 'SIGTERM'); // npm only, as a process manager would
    await allGone(started, since);
    expect(started.out.stdout).to.include('web stopped');
    expect(started.out.stdout).to.include('workers stopped');
    expect(started.out.stderr).not.to.match(/npm start: (web|worker) .*(exited with code|was killed)/);
  });

  it('hands the seeds to the settlement pool alone: web and the other workers get the public keys derived from them', async () => {
    // WALLET_XPUB_LIVE unset (empty): npm start derives it from WALLET_SEED_LIVE.
    const started = await startAll({ WALLET_XPUB_LIVE: '', WALLET_TREASURY_ADDRESS_LIVE: '' });
    const environ = (pid: number) => Object.fromEntries(readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
    const liveSeed = process.env.WALLET_SEED_LIVE!;
    const publicKeys = {
      WALLET_XPUB: accountXpub(DEV_SEED), WALLET_TREASURY_ADDRESS: treasuryAddress(DEV_SEED),
      WALLET_XPUB_LIVE: accountXpub(liveSeed), WALLET_TREASURY_ADDRESS_LIVE: treasuryAddress(liveSeed),
    };
    for (const name of ['web', 'worker'] as const) {
      const env = environ(started.pids[name]);
      expect(Object.keys(env).filter((k) => k.startsWith('WALLET_SEED')), name).to.deep.equal([]);
      expect(env, name).to.include(publicKeys);
    }
    expect(environ(started.pids.settlement)).to.include({ WALLET_SEED_LIVE: liveSeed });
    const since = Date.now();
    process.kill(started.pid, 'SIGTERM');
    await allGone(started, since);
  });

  it('Ctrl-C (SIGINT to the terminal\'s process group) drains web and workers, leaving no process', async () => {
    const started = await startAll();
    const since = Date.now();
    process.kill(-started.pid, 'SIGINT');
    await allGone(started, since);
    expect(started.out.stdout).to.include('web stopped');
    expect(started.out.stdout).to.include('workers stopped');
    expect(started.out.stderr).not.to.match(/npm start: (web|worker) .*(exited with code|was killed)/);
  });

  it('SIGINT to npm start alone (as a process manager sends it) drains web and workers, leaving no process', async () => {
    const started = await startAll();
    const since = Date.now();
    process.kill(started.pid, 'SIGINT');
    await allGone(started, since);
    expect(started.out.stdout).to.include('web stopped');
    expect(started.out.stdout).to.include('workers stopped');
  });

  it('a worker that dies takes the others down, and npm start exits non-zero naming it', async () => {
    const started = await startAll();
    const since = Date.now();
    process.kill(started.pids.worker, 'SIGKILL');
    await allGone(started, since);
    expect((await started.exit).code, started.out.stderr).to.equal(1);
    expect(started.out.stderr).to.match(new RegExp(`^npm start: worker \\(pid ${started.pids.worker}\\) was killed by SIGKILL; stopping web and settlement$`, 'm'));
    expect(started.out.stdout).to.include('web stopped');
  });

  it('no child outlives its supervisor, even one killed with SIGKILL: each drains itself', async () => {
    const started = await startAll();
    const since = Date.now();
    process.kill(started.pids.start, 'SIGKILL');
    await allGone(started, since);
    expect((await started.exit).code).not.to.equal(0);
    expect(started.out.stdout).to.include('web stopped');
    expect(started.out.stdout).to.include('workers stopped');
  });

  it('says which service is unreachable and how to start it', async () => {
    const redisDown = run('scripts/start.ts', { DATABASE_URL: fresh.toString(), REDIS_URL: 'redis://127.0.0.1:1' });
    expect(await redisDown.exit).to.equal(1);
    expect(redisDown.out.stderr).to.match(/Redis is unreachable.*redis-server/);
    const pgDown = run('scripts/start.ts', { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/rampway' });
    expect(await pgDown.exit).to.equal(1);
    expect(pgDown.out.stderr).to.match(/PostgreSQL is unreachable.*pg_ctlcluster/);
  });

  it('the web process starts and serves reads while Redis is down', async () => {
    const port = String(21000 + (process.pid % 20000));
    const web = run('api/main.ts', { DATABASE_URL: testDatabaseUrl(), REDIS_URL: 'redis://127.0.0.1:1', PORT: port });
    try {
      const up = await within(async () => (await fetch(`http://127.0.0.1:${port}/health`)).status === 200, 20_000);
      expect(up, web.out.stderr).to.equal(true);
      expect((await fetch(`http://127.0.0.1:${port}/ready`)).status).to.equal(503);
    } finally {
      web.child.kill('SIGTERM');
      expect(await web.exit).to.equal(0);
    }
  });

  it('the web process exits 1 when its port is taken, instead of claiming to listen', async () => {
    const net = await import('node:net');
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '0.0.0.0', r));
    const port = String((blocker.address() as import('node:net').AddressInfo).port);
    try {
      const web = run('api/main.ts', { DATABASE_URL: testDatabaseUrl(), PORT: port });
      expect(await web.exit).to.equal(1);
      expect(web.out.stdout).to.include('web cannot listen');
      expect(web.out.stdout).not.to.include('web listening');
    } finally {
      blocker.close();
    }
  });

  it('the Procfile web and worker commands, run without a shell as Docker runs them, drain on SIGTERM', async () => {
    execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'ignore' }); // they run dist/ (npm run build)
    const procfile = Object.fromEntries(readFileSync('Procfile', 'utf8').trim().split('\n').map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));
    expect(procfile).to.include.keys('release', 'web', 'worker', 'pricing', 'settlement', 'providers', 'sandbox', 'webhooks');
    const port = String(23000 + (process.pid % 20000));
    for (const [name, ready] of [['web', 'web listening'], ['worker', 'workers started']] as const) {
      const [command, ...args] = procfile[name].split(/\s+/);
      // The signal goes to the very process the line starts (a wrapper such as npx would swallow it).
      const child = spawn(command, args, { env: { ...process.env, LOG_LEVEL: 'info', DATABASE_URL: testDatabaseUrl(), PORT: port }, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      expect(await within(async () => out.includes(ready), 30_000), `${name}: ${out}`).to.equal(true);
      child.kill('SIGTERM');
      expect(await exit, name).to.equal(0);
      expect(out).to.match(name === 'web' ? /web stopped/ : /workers stopped/);
    }
  });

  it('a web or worker process told to stop while it boots ends with 0, not killed by the signal', async () => {
    const net = await import('node:net');
    // A database that accepts connections and never answers: each process stays in its boot until the signal.
    const sockets: import('node:net').Socket[] = [];
    const silent = net.createServer((socket) => void sockets.push(socket));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const databaseUrl = `postgres://postgres@127.0.0.1:${(silent.address() as import('node:net').AddressInfo).port}/rampway`;
    try {
      for (const script of ['api/main.ts', 'workers/main.ts']) {
        const connected = sockets.length;
        const child = spawn(process.execPath, [...TSX_NODE, script, 'pricing'], { env: { ...process.env, DATABASE_URL: databaseUrl, PORT: String(24000 + (process.pid % 20000)) }, stdio: 'ignore' });
        const exit = new Promise<{ code: number | null; signal: string | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
        expect(await within(async () => sockets.length > connected, 30_000), `${script} reached its database`).to.equal(true);
        child.kill('SIGTERM');
        expect(await exit, script).to.deep.equal({ code: 0, signal: null });
      }
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });

  it('SIGTERM drains a web process holding keep-alive connections within seconds', async () => {
    const http = await import('node:http');
    const port = String(22000 + (process.pid % 20000));
    const web = run('api/main.ts', { DATABASE_URL: testDatabaseUrl(), PORT: port });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
    const get = () => new Promise<number>((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: Number(port), path: '/health', agent }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      }).on('error', reject);
    });
    try {
      expect(await within(async () => (await get()) === 200, 20_000)).to.equal(true);
      await Promise.all([get(), get()]); // two idle keep-alive sockets now
      const started = Date.now();
      web.child.kill('SIGTERM');
      expect(await web.exit).to.equal(0);
      expect(Date.now() - started).to.be.below(5_000);
    } finally {
      agent.destroy();
    }
  });
});
