import { expect } from 'chai';
import { spawn } from 'node:child_process';
import pg from 'pg';
import { testDatabaseUrl } from '../env.js';

function run(script: string, env: Record<string, string>) {
  const child = spawn('node_modules/.bin/tsx', [script], { env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d) => (out.stdout += d));
  child.stderr.on('data', (d) => (out.stderr += d));
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, out, exit };
}

async function until(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check().catch(() => false)) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

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

  it('creates the database, migrates, serves web and workers, and drains both on SIGTERM', async () => {
    const port = String(20000 + (process.pid % 20000));
    const { child, out, exit } = run('scripts/start.ts', { DATABASE_URL: fresh.toString(), PORT: port });
    const up = await until(async () => (await fetch(`http://127.0.0.1:${port}/ready`)).status === 200, 60_000);
    expect(up, out.stderr + out.stdout).to.equal(true);
    const tables = new pg.Client({ connectionString: fresh.toString() });
    await tables.connect();
    const { rows } = await tables.query(`SELECT count(*)::int AS n FROM schema_migrations`);
    await tables.end();
    expect(rows[0].n).to.be.at.least(1);
    expect(await until(async () => out.stdout.includes('workers started'), 20_000)).to.equal(true);
    child.kill('SIGTERM');
    expect(await exit).to.equal(0);
    expect(out.stdout).to.include('web stopped');
    expect(out.stdout).to.include('workers stopped');
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
      const up = await until(async () => (await fetch(`http://127.0.0.1:${port}/health`)).status === 200, 20_000);
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
    const { readFileSync } = await import('node:fs');
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
      expect(await until(async () => out.includes(ready), 30_000), `${name}: ${out}`).to.equal(true);
      child.kill('SIGTERM');
      expect(await exit, name).to.equal(0);
      expect(out).to.match(name === 'web' ? /web stopped/ : /workers stopped/);
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
      expect(await until(async () => (await get()) === 200, 20_000)).to.equal(true);
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
