// npm run admin -- <command> [--flags]. See README "Operating". Exit status: 0 done, 1 failed, 2 usage.
// Every failure is one line on stderr, never a stack trace.
import { parseArgs } from 'node:util';
import type { Redis } from 'ioredis';
import type { DataSource } from 'typeorm';
import { ConfigError, configureFor, getConfig, holdWalletSeeds, type Config } from '../shared/config.js';
import type { SettingName } from '../shared/config-processes.js';
import { configCheck, configCheckText, formationCheck, formationText } from '../shared/admin/config-check.js';
import { createDataSource } from '../shared/db/data-source.js';
import { SCOPES } from '../shared/domain/api-keys.js';
import { createApiRedis } from '../shared/queues/connections.js';
import {
  AdminError, createBusiness, createKey, enableLive, listBusinesses, listKeys, revokeKey, setFees, treasuryWallet, walletXpub, type AdminDeps,
} from '../shared/admin/commands.js';
import { rotateEncryptionKey } from '../shared/admin/rotate-encryption-key.js';

interface Context {
  flags: Record<string, string | undefined>;
  json: boolean;
  config: Config;
  /** PostgreSQL (and Redis, for a change running web processes must hear of), connected on first use. */
  deps(opts?: { redis?: boolean }): Promise<AdminDeps>;
}
interface Command {
  usage: string;
  about: string;
  /** Reads WALLET_SEED / WALLET_SEED_LIVE (the others run where only the xpubs are, as on a web app). */
  seeds?: true;
  /** What it needs in production (NODE_ENV=production requires these, and nothing else, of it). */
  needs: (flags: Record<string, string | undefined>) => SettingName[];
  run(ctx: Context): Promise<{ out: unknown; human: string; exitCode?: number }>;
}

const list = (v: string | undefined) => (v === undefined ? undefined : v.split(',').map((s) => s.trim()).filter(Boolean));
// Not digits: NaN, which the command refuses with its own range message.
const num = (v: string | undefined) => (v === undefined ? undefined : /^\d+$/.test(v) ? Number(v) : NaN);
const table = (rows: string[][]) => rows.map((r) => r.map((cell, i) => cell.padEnd(Math.max(...rows.map((x) => x[i].length)))).join('  ').trimEnd()).join('\n');

const COMMANDS: Record<string, Command> = {
  'create-business': {
    usage: '--name NAME [--json]',
    about: 'a business, with one sandbox and one live key holding every scope',
    needs: () => ['DATABASE_URL'],
    async run({ flags, deps }) {
      const r = await createBusiness(await deps(), { name: flags.name ?? '' });
      return { out: r, human: [`business ${r.business_id} (${r.name})`, ...r.keys.map((k) => `  ${k.environment} key ${k.id}: ${k.key}`), 'Keys are shown once: store them now.'].join('\n') };
    },
  },
  'create-key': {
    usage: '--business ID --environment sandbox|live [--scopes a,b] [--allowed-ips ip,ip] [--rate-limit N] [--rate-window SECONDS] [--json]',
    about: 'an API key; --scopes takes scopes, resource:* (customers:*) or *, every scope when omitted',
    needs: () => ['DATABASE_URL'],
    async run({ flags, deps }) {
      const scopes = list(flags.scopes);
      if (scopes?.length === 0) throw new AdminError('--scopes names no scope (omit it for every scope)');
      const r = await createKey(await deps(), {
        businessId: flags.business ?? '', environment: flags.environment ?? '', scopes, allowedIps: list(flags['allowed-ips']),
        rateLimit: num(flags['rate-limit']), rateWindowSeconds: num(flags['rate-window']),
      });
      return { out: r, human: `${r.environment} key ${r.id}: ${r.key}\nscopes: ${r.scopes.join(', ')}\nThe key is shown once: store it now.` };
    },
  },
  'revoke-key': {
    usage: '--key ID [--json]',
    about: 'revokes a key; running web processes drop it at once',
    needs: () => ['DATABASE_URL', 'REDIS_URL'],
    async run({ flags, deps }) {
      const r = await revokeKey(await deps({ redis: true }), { keyId: flags.key ?? '' });
      return { out: r, human: `revoked key ${r.id} at ${r.revoked_at}` };
    },
  },
  'enable-live': {
    usage: '--business ID [--json]',
    about: 'lets the business use its live keys',
    needs: () => ['DATABASE_URL', 'REDIS_URL'],
    async run({ flags, deps }) {
      const r = await enableLive(await deps({ redis: true }), { businessId: flags.business ?? '' });
      return { out: r, human: `live enabled for business ${r.business_id}` };
    },
  },
  'set-fees': {
    usage: '--business ID --platform-bps N [--platform-min AMOUNT] [--json]',
    about: 'the platform fee: N in 0..10000 (default 50); AMOUNT in USDC, unchanged when omitted',
    needs: () => ['DATABASE_URL', 'REDIS_URL'],
    async run({ flags, deps }) {
      const r = await setFees(await deps({ redis: true }), { businessId: flags.business ?? '', platformBps: flags['platform-bps'], platformMin: flags['platform-min'] });
      return { out: r, human: `platform fee of business ${r.business_id}: ${r.platform_bps} bps, at least ${r.platform_min} USDC` };
    },
  },
  'list-businesses': {
    usage: '[--json]',
    about: 'every business: id, name, status, live enabled, platform fee, created',
    needs: () => ['DATABASE_URL'],
    async run({ deps }) {
      const r = await listBusinesses(await deps());
      const rows = r.map((b) => [b.id, b.name, b.status, b.live_enabled ? 'live' : 'sandbox only', `${b.platform_bps} bps, min ${b.platform_min}`, b.created_at]);
      return { out: r, human: r.length ? table([['ID', 'NAME', 'STATUS', 'LIVE', 'PLATFORM FEE', 'CREATED'], ...rows]) : 'no businesses' };
    },
  },
  'list-keys': {
    usage: '--business ID [--json]',
    about: "the business's keys: id, environment, prefix, scopes, allowed IPs, revoked, created (never the key)",
    needs: () => ['DATABASE_URL'],
    async run({ flags, deps }) {
      const r = await listKeys(await deps(), { businessId: flags.business ?? '' });
      const rows = r.map((k) => [k.id, k.environment, `${k.prefix}...`, k.revoked ? `revoked ${k.revoked_at}` : 'active', k.created_at,
        k.allowed_ips.join(',') || 'any', k.scopes.length === SCOPES.length ? '* (every scope)' : k.scopes.join(',') || '(none)']);
      return { out: r, human: r.length ? table([['ID', 'ENV', 'PREFIX', 'STATUS', 'CREATED', 'ALLOWED IPS', 'SCOPES'], ...rows]) : 'no keys' };
    },
  },
  'treasury-address': {
    usage: '--environment sandbox|live [--json]',
    about: "the environment's treasury hot wallet address, WALLET_TREASURY_ADDRESS[_LIVE] (from WALLET_SEED, or WALLET_SEED_LIVE)",
    seeds: true,
    needs: (flags) => [flags.environment === 'live' ? 'WALLET_SEED_LIVE' : 'WALLET_SEED'],
    async run({ flags, config }) {
      const r = treasuryWallet(config, { environment: flags.environment ?? '' });
      return { out: r, human: r.address };
    },
  },
  'wallet-xpub': {
    usage: '--environment sandbox|live [--json]',
    about: "the extended public key of the environment's deposit and managed-wallet addresses, WALLET_XPUB[_LIVE] (from WALLET_SEED, or WALLET_SEED_LIVE)",
    seeds: true,
    needs: (flags) => [flags.environment === 'live' ? 'WALLET_SEED_LIVE' : 'WALLET_SEED'],
    async run({ flags, config }) {
      const r = walletXpub(config, { environment: flags.environment ?? '' });
      return { out: r, human: r.xpub };
    },
  },
  'rotate-encryption-key': {
    usage: '[--json]',
    about: 're-encrypts every row not under the first key of ENCRYPTION_KEYS (safe to re-run)',
    needs: () => ['DATABASE_URL', 'ENCRYPTION_KEYS'],
    async run({ json, deps }) {
      const r = await rotateEncryptionKey(await deps(), { onBatch: (p) => { if (!json) process.stderr.write(`${p.table}: ${p.rotated} re-encrypted\n`); } });
      const human = `re-encrypted ${r.rotated} rows under key ${r.current_key_id}; ${r.remaining} rows remain under other keys` +
        r.failed.map((f) => `\n  could not open ${f.table} ${f.id}`).join('');
      // Rows that would not open need an operator: say so in the exit status too, so a deploy script stops.
      return { out: r, human, exitCode: r.failed.length ? 1 : 0 };
    },
  },
  'config-check': {
    usage: '[--process web|release|pricing|settlement|providers|sandbox|webhooks|worker|all] [--formation web=2,pricing=2,...] [--json]',
    about: 'what each process needs in production, and which of it is missing or malformed here (names, never values); exits 1 when anything is',
    needs: () => [],
    async run({ flags }) {
      const reports = configCheck(process.env, flags.process ?? 'all');
      const formation = formationCheck(process.env, flags.formation);
      const human = `${configCheckText(reports)}\n\n${formationText(formation)}`;
      return { out: { ok: reports.every((r) => r.ok), processes: reports, formation }, human, exitCode: reports.every((r) => r.ok) ? 0 : 1 };
    },
  },
};

const commandUsage = (name: string) => `npm run admin -- ${name} ${COMMANDS[name].usage}`;
const USAGE = [
  'usage: npm run admin -- <command> [flags]   (--json: machine output; <command> --help: that command alone)',
  'commands:',
  ...Object.entries(COMMANDS).map(([name, c]) => `  ${name} ${c.usage}\n      ${c.about}`),
  `scopes: ${SCOPES.join(', ')}`,
  'exit status: 0 done, 1 failed, 2 usage',
].join('\n');

const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();
/** The message of an error, or of the first of several (a refused connection to both ::1 and 127.0.0.1). */
function reason(err: unknown): string {
  const e = err as { message?: string; code?: string; errors?: unknown[] } | undefined;
  return oneLine(e?.message || (e?.errors?.length ? reason(e.errors[0]) : '') || e?.code || String(err));
}
const hostPort = (url: string, port: number) => {
  const u = new URL(url);
  return `${u.hostname}:${u.port || port}`;
};

/** Connects what the command asks for, once; close() ends whatever was opened. */
function connections() {
  let ds: DataSource | undefined;
  let redis: Redis | undefined;
  let deps: AdminDeps | undefined;
  let redisDown = false;
  return {
    get redisDown() { return redisDown; },
    async deps(opts: { redis?: boolean } = {}): Promise<AdminDeps> {
      if (deps) return deps;
      const config = getConfig();
      const where = hostPort(config.databaseUrl, 5432);
      ds = createDataSource({ poolSize: 2 });
      await ds.initialize().catch((err: { code?: string }) => {
        ds = undefined;
        const database = decodeURIComponent(new URL(config.databaseUrl).pathname.slice(1));
        if (err.code === '3D000') throw new AdminError(`database "${database}" does not exist at ${where}; npm run migrate creates it (or set DATABASE_URL)`);
        throw new AdminError(`PostgreSQL is unreachable at ${where} (${reason(err)}); start it there, or set DATABASE_URL`);
      });
      if (opts.redis) {
        redis = createApiRedis(config.redisUrl);
        const ready = await new Promise<boolean>((resolve) => {
          redis!.once('ready', () => resolve(true));
          redis!.once('error', () => resolve(false));
          setTimeout(() => resolve(false), 3000).unref();
        });
        if (!ready) {
          redis.disconnect();
          redis = undefined;
          redisDown = true;
        }
      }
      deps = { ds, config, redis };
      return deps;
    },
    async close() {
      redis?.disconnect();
      await ds?.destroy().catch(() => undefined);
    },
  };
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  const usageError = (message: string, usage = USAGE) => {
    process.stderr.write(`error: ${message}\n${usage}\n`);
    return 2;
  };
  if (name === undefined) return usageError('a command is required');
  if (name === '--help' || name === '-h' || name === 'help') {
    const topic = rest[0] !== undefined && Object.hasOwn(COMMANDS, rest[0]) ? rest[0] : undefined;
    process.stdout.write(`${topic ? `usage: ${commandUsage(topic)}\n  ${COMMANDS[topic].about}` : USAGE}\n`);
    return 0;
  }
  if (!Object.hasOwn(COMMANDS, name)) return usageError(`unknown command "${name}"`);
  const command = COMMANDS[name];
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(`usage: ${commandUsage(name)}\n  ${command.about}\n`);
    return 0;
  }
  const stringFlags = [...command.usage.matchAll(/--([a-z-]+)/g)].map((m) => m[1]).filter((f) => f !== 'json');
  let parsed;
  try {
    parsed = parseArgs({
      args: rest,
      options: { ...Object.fromEntries(stringFlags.map((f) => [f, { type: 'string' as const }])), json: { type: 'boolean', default: false } },
      strict: true,
      allowPositionals: false,
    });
  } catch (err) {
    // node's messages run on with advice about positionals: the first sentence says what is wrong
    return usageError(`${name}: ${reason(err).split(/\.\s/)[0]}`, `usage: ${commandUsage(name)}`);
  }
  const { json, ...flags } = parsed.values as Record<string, string | undefined> & { json: boolean };
  if (command.seeds) holdWalletSeeds();
  configureFor(['NODE_ENV', ...command.needs(flags)], `npm run admin -- ${name}`);
  // Read on first use: a command that needs no configuration (config-check) never loads it.
  const conn = connections();
  try {
    const result = await command.run({ flags, json, get config() { return getConfig(); }, deps: conn.deps });
    process.stdout.write(json ? `${JSON.stringify(result.out)}\n` : `${result.human}\n`);
    if (conn.redisDown) {
      const config = getConfig();
      process.stderr.write(`warning: Redis is unreachable at ${hostPort(config.redisUrl, 6379)} (REDIS_URL), so running web processes were not told; ` +
        `they see the change within ${config.apiKeyCacheTtlMs} ms (API_KEY_CACHE_TTL_MS)\n`);
    }
    return result.exitCode ?? 0;
  } catch (err) {
    if ((err as { code?: string }).code === '42P01') throw new AdminError(`the database at ${hostPort(getConfig().databaseUrl, 5432)} has no tables yet (${reason(err)}); run npm run migrate`);
    throw err;
  } finally {
    await conn.close();
  }
}

// Once stdout and stderr have drained: a long listing into a pipe would otherwise be cut short.
const exit = (code: number) => process.stdout.write('', () => process.stderr.write('', () => process.exit(code)));

function fail(err: unknown): void {
  const known = err instanceof AdminError || err instanceof ConfigError;
  process.stderr.write(`error: ${known ? oneLine(err.message) : `unexpected failure: ${reason(err)}`}\n`);
  exit(1);
}
process.on('uncaughtException', fail);
process.on('unhandledRejection', fail);
main(process.argv.slice(2)).then(exit, fail);
