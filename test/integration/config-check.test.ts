// An operator's first day (CONTRACT §15, §18): each process needs only its own configuration, config-check names it,
// and the Procfile's processes start from dist/ with production settings given only what config-check names.
import { expect } from 'chai';
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { testDatabaseUrl, testRedisUrl } from '../env.js';
import { until } from '../helpers/until.js';
import { walletKeyEnv } from '../helpers/wallets.js';
import { WEB_NODE_FLAGS } from '../../shared/web-flags.js';

const SANDBOX_SEED = 'abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about';
const LIVE_SEED = 'legal winner thank year wave sausage worth useful legal winner thank yellow';

/** Runs a command with exactly `env` (and PATH): nothing of this test run's own environment leaks in. */
function run(command: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, { env: { PATH: process.env.PATH!, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })));
}
const admin = (args: string[], env: Record<string, string>) => run(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', ...args], env);

interface Report { process: string; ok: boolean; settings: { name: string; state: string; problem?: string }[]; boot_error: string | null }
async function check(processName: string, env: Record<string, string>): Promise<{ code: number | null; reports: Report[] }> {
  const r = await admin(['config-check', '--process', processName, '--json'], env);
  return { code: r.code, reports: (JSON.parse(r.stdout) as { processes: Report[] }).processes };
}

/** A value for every variable config-check can name: what an operator would set. */
const VALUES: Record<string, string> = {
  NODE_ENV: 'production',
  DATABASE_URL: testDatabaseUrl(),
  REDIS_URL: testRedisUrl(),
  ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('base64')}`,
  IDEMPOTENCY_SECRET: randomBytes(24).toString('hex'),
  WALLET_SEED: SANDBOX_SEED,
  WALLET_SEED_LIVE: LIVE_SEED,
  ...walletKeyEnv(SANDBOX_SEED, 'sandbox'),
  ...walletKeyEnv(LIVE_SEED, 'live'),
};
const only = (names: string[]) => Object.fromEntries(names.map((n) => [n, VALUES[n]]));

describe('configuration per process: npm run admin -- config-check', function () {
  this.timeout(120_000);

  it('lists what each process needs, missing first of all; names only; exits 1', async () => {
    const { code, reports } = await check('all', {});
    expect(code).to.equal(1);
    const procfile = readFileSync('Procfile', 'utf8').trim().split('\n').map((l) => l.slice(0, l.indexOf(':')));
    expect(reports.map((r) => r.process).sort()).to.deep.equal([...procfile].sort());
    const names = (p: string) => reports.find((r) => r.process === p)!.settings.map((s) => s.name);
    expect(names('release')).to.deep.equal(['NODE_ENV', 'DATABASE_URL']);
    expect(names('web')).to.include.members(['DATABASE_URL', 'REDIS_URL', 'ENCRYPTION_KEYS', 'IDEMPOTENCY_SECRET', 'WALLET_XPUB_LIVE', 'WALLET_TREASURY_ADDRESS_LIVE']);
    expect(names('web')).to.not.include.members(['WALLET_SEED', 'WALLET_SEED_LIVE']);
    // Only the settlement pool signs: it gets the seeds, derives the public keys itself, and never fingerprints requests.
    expect(names('settlement')).to.include.members(['WALLET_SEED', 'WALLET_SEED_LIVE']).and.not.include.members(['WALLET_XPUB', 'IDEMPOTENCY_SECRET']);
    for (const r of reports) expect(r.settings.every((s) => s.state === 'missing'), r.process).to.equal(true);
  });

  it('prints each process\'s database pool and what a formation of dynos asks of the connection pooler (issue 41)', async () => {
    const defaults = await admin(['config-check', '--process', 'all', '--json'], {});
    const out = JSON.parse(defaults.stdout) as { processes: (Report & { database_pool: number | null })[]; formation: { connections: Record<string, number>; total: number } };
    const pool = (p: string) => out.processes.find((r) => r.process === p)!.database_pool;
    expect([pool('web'), pool('pricing'), pool('worker'), pool('release')]).to.deep.equal([10, 5, 10, null]);
    // The Procfile's two web dynos and two of each pool: docs/pooler.md's example, within PgBouncer's default 100.
    expect(out.formation.total).to.equal(70);
    const sized = await admin(['config-check', '--process', 'web', '--formation', 'web=5,settlement=3'], { DATABASE_POOL_SIZE: '4' });
    expect(sized.stdout).to.match(/web: .*\(database pool 4\)/).and.match(/web 5 x 4 = 20, settlement 3 x 4 = 12; 32 in all/);
    const bad = await admin(['config-check', '--formation', 'nosuch=2'], {});
    expect(bad.code).to.not.equal(0);
    expect(bad.stderr + bad.stdout).to.match(/not a Procfile process/);
  });

  it('says which are malformed without printing a value, and passes (exit 0) once the process has what it needs', async () => {
    const secretish = 'xpub-not-really-0123456789';
    const human = await admin(['config-check', '--process', 'web'], { ...only(['NODE_ENV', 'DATABASE_URL']), REDIS_URL: 'http://nope', WALLET_XPUB: secretish, NODE_ENV: 'staging' });
    expect(human.code).to.equal(1);
    expect(human.stdout).to.match(/malformed\s+NODE_ENV\s+must be production/);
    expect(human.stdout).to.match(/malformed\s+REDIS_URL/);
    expect(human.stdout).to.match(/malformed\s+WALLET_XPUB\s/);
    expect(human.stdout).to.match(/missing\s+ENCRYPTION_KEYS/);
    expect(human.stdout + human.stderr).to.not.include(secretish);
    expect(human.stdout + human.stderr).to.not.include('http://nope');

    const web = await check('web', only(['NODE_ENV', 'DATABASE_URL', 'REDIS_URL', 'ENCRYPTION_KEYS', 'IDEMPOTENCY_SECRET', 'WALLET_XPUB', 'WALLET_TREASURY_ADDRESS', 'WALLET_XPUB_LIVE', 'WALLET_TREASURY_ADDRESS_LIVE']));
    expect(web.code, JSON.stringify(web.reports)).to.equal(0);
    const release = await check('release', only(['NODE_ENV', 'DATABASE_URL']));
    expect(release.code).to.equal(0);
    // Needs met, another variable malformed: it would not boot, and config-check says so.
    const port = await check('release', { ...only(['NODE_ENV', 'DATABASE_URL']), TRUST_PROXY: 'sometimes' });
    expect(port.code).to.equal(1);
    expect(port.reports[0].boot_error).to.match(/^TRUST_PROXY/);
  });

  it('the release phase migrates in production given DATABASE_URL alone', async () => {
    const r = await run(process.execPath, ['--import', 'tsx', 'scripts/migrate.ts'], only(['NODE_ENV', 'DATABASE_URL']));
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/migrations: up to date|applied:/);
  });

  it('each admin command needs only what it uses: list-businesses the database, wallet-xpub its seed', async () => {
    const list = await admin(['list-businesses', '--json'], only(['NODE_ENV', 'DATABASE_URL']));
    expect(list.code, list.stderr).to.equal(0);
    const xpub = await admin(['wallet-xpub', '--environment', 'live', '--json'], only(['NODE_ENV', 'WALLET_SEED_LIVE']));
    expect(xpub.code, xpub.stderr).to.equal(0);
    expect(JSON.parse(xpub.stdout).xpub).to.equal(VALUES.WALLET_XPUB_LIVE);
    const refused = await admin(['rotate-encryption-key'], only(['NODE_ENV', 'DATABASE_URL']));
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.match(/npm run admin -- rotate-encryption-key needs ENCRYPTION_KEYS/);
  });
});

describe("the Procfile's processes from dist/, in production, given only what config-check names", function () {
  this.timeout(240_000);
  // A database of its own, which the release phase creates and migrates: the pools' address pools and schedules
  // write nothing into the one the other tests read.
  const fresh = new URL(testDatabaseUrl());
  fresh.pathname = `/rampway_procfile_${process.pid}`;
  const dropFresh = async () => {
    const admin = new URL(testDatabaseUrl());
    admin.pathname = '/postgres';
    const client = new pg.Client({ connectionString: admin.toString() });
    await client.connect();
    await client.query(`DROP DATABASE IF EXISTS "${fresh.pathname.slice(1)}" WITH (FORCE)`);
    await client.end();
  };
  before(async () => {
    await dropFresh();
    execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'ignore' });
  });
  after(dropFresh);

  const procfile = Object.fromEntries(readFileSync('Procfile', 'utf8').trim().split('\n').map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));

  it('runs compiled JavaScript, never tsx', () => {
    for (const [name, line] of Object.entries(procfile)) expect(line, name).to.match(/^node --enable-source-maps( --[a-z-]+=\d+)* dist\/\S+\.js( [a-z]+)?$/);
    // The web dyno runs with the flags npm start and the benchmarks give it (shared/web-flags.ts).
    expect(procfile.web).to.equal(`node --enable-source-maps ${WEB_NODE_FLAGS.join(' ')} dist/api/main.js`);
    const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
    expect(pkg.dependencies).to.not.have.property('tsx');
    expect(pkg.devDependencies).to.have.property('tsx');
    // The lockfile agrees: a production install (npm install --omit=dev, the platform's prune) leaves tsx and its
    // esbuild out, which it would not if a production dependency pulled them in.
    const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    for (const name of ['tsx', 'esbuild']) expect(lock.packages[`node_modules/${name}`]?.dev, name).to.equal(true);
  });

  it('npm run build writes a source map beside every file, and the compiled code imports production dependencies alone', () => {
    const files = (readdirSync('dist', { recursive: true }) as string[]).filter((f) => f.endsWith('.js')).map((f) => join('dist', f));
    expect(files).to.include.members([join('dist', 'api', 'main.js'), join('dist', 'workers', 'main.js'), join('dist', 'scripts', 'migrate.js')]);
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { dependencies: Record<string, string> };
    const imported = new Set<string>();
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      // --enable-source-maps turns a stack trace back into the TypeScript file and line: the map must be there and
      // name a source that exists.
      expect(text, file).to.match(/\n\/\/# sourceMappingURL=\S+\.js\.map\s*$/);
      const map = JSON.parse(readFileSync(`${file}.map`, 'utf8')) as { sources: string[] };
      for (const source of map.sources) expect(existsSync(join(dirname(file), source)), `${file}.map: ${source}`).to.equal(true);
      const statics = text.matchAll(/^(?:import\s*|(?:import|export)\b[^;'"]*?\bfrom\s*)['"]([^'"]+)['"]/gm);
      const dynamics = text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g);
      for (const [, specifier] of [...statics, ...dynamics]) {
        if (specifier!.startsWith('.') || specifier!.startsWith('node:') || builtinModules.includes(specifier!)) continue;
        imported.add(specifier!.startsWith('@') ? specifier!.split('/').slice(0, 2).join('/') : specifier!.split('/')[0]!);
      }
    }
    // What Heroku's prune and the image's `npm install --omit=dev` leave: a development dependency imported here
    // would crash the dyno at boot.
    expect([...imported].filter((name) => !(name in pkg.dependencies)), 'imported but not a production dependency').to.deep.equal([]);
    expect([...imported]).to.include.members(['express', 'typeorm', 'bullmq']);
  });

  for (const name of ['release', 'web', 'worker', 'pricing', 'settlement', 'providers', 'sandbox', 'webhooks']) {
    it(`${name}`, async () => {
      const { reports } = await check(name, {});
      const env: Record<string, string> = {
        ...only(reports[0].settings.map((s) => s.name)),
        ...(reports[0].settings.some((s) => s.name === 'DATABASE_URL') ? { DATABASE_URL: fresh.toString() } : {}),
        // What the platform sets (PORT), and this run's own Redis keys on the shared Redis (test isolation).
        PORT: String(25000 + (process.pid % 10000)),
        REDIS_PREFIX: `${process.env.REDIS_PREFIX ?? 'test'}-procfile`,
      };
      const [command, ...args] = procfile[name].split(/\s+/);
      if (name === 'release') {
        const r = await run(command, args, env);
        expect(r.code, r.stderr).to.equal(0);
        expect(r.stdout).to.match(/^applied: /); // a fresh database: every migration, compiled
        return;
      }
      const child = spawn(command, args, { env: { PATH: process.env.PATH!, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (out += d));
      const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      try {
        const ready = name === 'web' ? 'web listening' : 'workers started';
        await until(async () => out.includes(ready) || child.exitCode !== null, { timeoutMs: 60_000, everyMs: 100 });
        expect(out, out).to.include(ready);
        if (name === 'web') {
          expect((await fetch(`http://127.0.0.1:${env.PORT}/ready`)).status).to.equal(200);
          // The reference carries the guide's chapters (copied beside dist/ by the build), as under tsx.
          const document = (await (await fetch(`http://127.0.0.1:${env.PORT}/openapi.json`)).json()) as { info: { description: string } };
          expect(document.info.description).to.include('# Idempotency').and.include('# Sandbox');
        }
      } finally {
        child.kill('SIGTERM');
      }
      expect(await exit, out).to.equal(0);
    });
  }

  it('npm start with NODE_ENV=production runs the compiled service too, each child from dist/', async () => {
    const { reports } = await check('web', {});
    const port = String(26000 + (process.pid % 10000));
    // npm start holds the seeds (it hands them to its settlement child alone) and derives the public keys from them.
    const env = { ...only([...reports[0].settings.map((s) => s.name).filter((n) => !n.startsWith('WALLET_')), 'WALLET_SEED', 'WALLET_SEED_LIVE']),
      DATABASE_URL: fresh.toString(), PORT: port, REDIS_PREFIX: `${process.env.REDIS_PREFIX ?? 'test'}-prodstart`, HOME: process.env.HOME ?? '/tmp' };
    const child = spawn('npm', ['start'], { env: { PATH: process.env.PATH!, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    let started: number[] = [];
    try {
      await until(async () => out.includes('npm start: ready') || child.exitCode !== null, { timeoutMs: 90_000, everyMs: 200 });
      expect(out, out).to.include('npm start: ready');
      const table = execFileSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8' }).trim().split('\n').map((l) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(l)!);
      const tree = (pid: string): RegExpExecArray[] => table.filter((r) => r[2] === pid).flatMap((r) => [r, ...tree(r[1]!)]);
      started = tree(String(child.pid)).map((r) => Number(r[1]));
      const commands = tree(String(child.pid)).map((r) => r[3]).join('\n');
      expect(commands).to.match(/dist\/scripts\/start\.js/).and.match(/dist\/api\/main\.js/).and.match(/dist\/workers\/main\.js settlement/);
      expect(commands).to.not.match(/tsx/);
    } finally {
      // A group already gone (npm start ended early) must not hide the assertion that says why with ESRCH.
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
      }
    }
    await exit;
    // Every process it started drains and ends (npm itself may return first: see start.test.ts).
    const alive = (pid: number) => { try { process.kill(pid, 0); return true; } catch { return false; } };
    await until(() => started.every((pid) => !alive(pid)), { timeoutMs: 40_000, everyMs: 200, what: 'npm start\'s children to end' });
    // npm start's own lines name a child that died of a signal or outlived its drain.
    const said = out.split('\n').filter((line) => line.startsWith('npm start:')).join('\n');
    expect(said, said).to.not.match(/was killed by|still running/);
  });
});
