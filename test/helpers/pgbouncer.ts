// A PgBouncer of our own in front of the test database, as a platform's pooler is: transaction mode and PgBouncer's
// defaults. The ini holds only the [databases] entry (pool_mode=transaction in it) and where it listens and who may
// log in: nothing ignored (no ignore_startup_parameters), no pool setting changed. A non-daemon child on a spare port,
// its ini in a temp dir; run as `nobody` when the test runs as root (PgBouncer refuses root).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './processes.js';

export interface Bouncer {
  /** The test database's URL through the pooler (extra databases by name from `url(name)`). */
  url: string;
  pid: number;
  urlOf(database: string, user?: string): string;
  /** Everything PgBouncer logged (connections refused, closed, errors). */
  log(): string;
  /** SHOW <what> on PgBouncer's admin console (CLIENTS, SERVERS, POOLS). */
  show(what: string): Promise<Record<string, unknown>[]>;
  /** Of `pids`, those holding a connection that PgBouncer's SHOW CLIENTS lists (a process told apart by its sockets). */
  listedPids(pids: number[]): Promise<number[]>;
  stop(): Promise<void>;
}

// Debian installs it in /usr/sbin, which a non-root PATH may lack.
export const PGBOUNCER = process.env.PGBOUNCER_BIN || (existsSync('/usr/sbin/pgbouncer') ? '/usr/sbin/pgbouncer' : 'pgbouncer');

export function pgbouncerInstalled(): boolean {
  return spawnSync(PGBOUNCER, ['--version'], { stdio: 'ignore' }).status === 0;
}

/**
 * Starts PgBouncer in front of `databaseUrl`'s server, with a [databases] entry for its database and for each of
 * `also` (database, or database:user: the user it logs in as there).
 */
export async function startPgbouncer(databaseUrl: string, also: string[] = []): Promise<Bouncer> {
  const target = new URL(databaseUrl);
  const database = decodeURIComponent(target.pathname.slice(1));
  const user = decodeURIComponent(target.username || 'postgres');
  const dir = mkdtempSync(path.join(tmpdir(), 'rampway-pgbouncer-'));
  chmodSync(dir, 0o755);
  const port = await freePort();
  const entry = (name: string, as: string) =>
    `${name}_${as} = host=${target.hostname} port=${target.port || 5432} dbname=${name} user=${as} pool_mode=transaction`;
  const entries = [[database, user], ...also.map((a) => [a.split(':')[0], a.split(':')[1] ?? user])];
  writeFileSync(path.join(dir, 'pgbouncer.ini'), [
    '[databases]',
    ...entries.map(([name, as]) => entry(name, as)),
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    // Logins: the user is the one each [databases] entry names (the server is trust-configured for tests).
    'auth_type = any',
    `admin_users = ${user}`,
    '',
  ].join('\n'));
  chmodSync(path.join(dir, 'pgbouncer.ini'), 0o644);
  const asRoot = process.getuid?.() === 0;
  const child: ChildProcess = spawn(PGBOUNCER, [...(asRoot ? ['-u', 'nobody'] : []), path.join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const keep = (d: Buffer) => { log = (log + d).slice(-200_000); };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const started = Date.now();
    const check = () => {
      if (child.exitCode !== null) return reject(new Error(`pgbouncer exited with ${child.exitCode}: ${log}`));
      if (log.includes('process up')) return resolve();
      if (Date.now() - started > 10_000) return reject(new Error(`pgbouncer did not come up: ${log}`));
      setTimeout(check, 50);
    };
    check();
  });
  const urlOf = (name: string, as = user) => `postgres://${encodeURIComponent(as)}@127.0.0.1:${port}/${encodeURIComponent(`${name}_${as}`)}`;
  async function show(what: string): Promise<Record<string, unknown>[]> {
    const admin = new pg.Client({ connectionString: `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/pgbouncer` });
    await admin.connect();
    try {
      // The admin console speaks the simple protocol only.
      return (await admin.query(`SHOW ${what.replace(/[^A-Za-z_]/g, '')}`)).rows;
    } finally {
      await admin.end();
    }
  }
  return {
    url: urlOf(database),
    pid: child.pid!,
    urlOf,
    log: () => log,
    show,
    async listedPids(pids) {
      const clientPorts = new Set((await show('CLIENTS')).map((c) => Number(c.port)));
      return pids.filter((pid) => [...portsTo(pid, port)].some((p) => clientPorts.has(p)));
    },
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The local ports of `pid`'s TCP connections to 127.0.0.1:`remotePort` (Linux: the socket inodes among its open
 * files, found in /proc/net/tcp). Empty when the process is gone.
 */
export function portsTo(pid: number, remotePort: number): Set<number> {
  const inodes = new Set<string>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSyncSafe(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    }
  } catch {
    return new Set();
  }
  const ports = new Set<number>();
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || !inodes.has(f[9])) continue;
    const [local, remote] = [f[1], f[2]].map((a) => parseInt(a.split(':')[1], 16));
    if (remote === remotePort) ports.add(local);
  }
  return ports;
}

function readlinkSyncSafe(file: string): string {
  try {
    return readlinkSync(file);
  } catch {
    return ''; // closed meanwhile
  }
}
