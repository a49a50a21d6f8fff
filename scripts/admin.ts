// npm run admin -- <command> [--flags]. See README "Operating".
import { parseArgs } from 'node:util';
import { getConfig } from '../shared/config.js';
import { createDataSource } from '../shared/db/data-source.js';
import { createApiRedis } from '../shared/queues/connections.js';
import { AdminError, createBusiness, createKey, enableLive, revokeKey, setFees } from '../shared/admin/commands.js';
import { rotateEncryptionKey } from '../shared/admin/rotate-encryption-key.js';

const USAGE = `usage: npm run admin -- <command>
  create-business --name NAME [--json]
  create-key --business ID --environment sandbox|live [--scopes a,b] [--allowed-ips ip,ip] [--rate-limit N] [--rate-window SECONDS] [--json]
  revoke-key --key ID [--json]
  enable-live --business ID [--json]
  set-fees --business ID --platform-bps N [--platform-min AMOUNT] [--json]   N in 0..10000 (default 50); AMOUNT in USDC, unchanged when omitted
  rotate-encryption-key [--json]   re-encrypts every row not under the first key of ENCRYPTION_KEYS`;

const list = (v: string | undefined) => (v === undefined ? undefined : v.split(',').map((s) => s.trim()).filter(Boolean));
const num = (flag: string, v: string | undefined) => {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new AdminError(`${flag} must be a positive integer`);
  return Number(v);
};

async function main(): Promise<number> {
  const [command, ...rest] = process.argv.slice(2);
  const { values } = parseArgs({
    args: rest,
    options: {
      name: { type: 'string' }, business: { type: 'string' }, environment: { type: 'string' }, scopes: { type: 'string' },
      'allowed-ips': { type: 'string' }, 'rate-limit': { type: 'string' }, 'rate-window': { type: 'string' }, key: { type: 'string' },
      'platform-bps': { type: 'string' }, 'platform-min': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const config = getConfig();
  const ds = createDataSource({ poolSize: 2 });
  await ds.initialize();
  const redis = createApiRedis(config.redisUrl);
  await new Promise((resolve) => { redis.once('ready', resolve); redis.once('error', resolve); });
  const deps = { ds, config, redis };
  try {
    let out: unknown;
    let exitCode = 0;
    let human: string;
    switch (command) {
      case 'create-business': {
        const r = await createBusiness(deps, { name: values.name ?? '' });
        out = r;
        human = [`business ${r.business_id} (${r.name})`, ...r.keys.map((k) => `  ${k.environment} key ${k.id}: ${k.key}`), 'Keys are shown once: store them now.'].join('\n');
        break;
      }
      case 'create-key': {
        const r = await createKey(deps, {
          businessId: values.business ?? '', environment: values.environment ?? '', scopes: list(values.scopes),
          allowedIps: list(values['allowed-ips']), rateLimit: num('--rate-limit', values['rate-limit']), rateWindowSeconds: num('--rate-window', values['rate-window']),
        });
        out = r;
        human = `${r.environment} key ${r.id}: ${r.key}\nscopes: ${r.scopes.join(', ')}\nThe key is shown once: store it now.`;
        break;
      }
      case 'revoke-key': {
        const r = await revokeKey(deps, { keyId: values.key ?? '' });
        out = r;
        human = `revoked key ${r.id} at ${r.revoked_at}`;
        break;
      }
      case 'enable-live': {
        const r = await enableLive(deps, { businessId: values.business ?? '' });
        out = r;
        human = `live enabled for business ${r.business_id}`;
        break;
      }
      case 'set-fees': {
        const r = await setFees(deps, { businessId: values.business ?? '', platformBps: values['platform-bps'], platformMin: values['platform-min'] });
        out = r;
        human = `platform fee of business ${r.business_id}: ${r.platform_bps} bps, at least ${r.platform_min} USDC`;
        break;
      }
      case 'rotate-encryption-key': {
        const r = await rotateEncryptionKey(deps, { onBatch: (p) => { if (!values.json) process.stderr.write(`${p.table}: ${p.rotated} re-encrypted\n`); } });
        out = r;
        human = `re-encrypted ${r.rotated} rows under key ${r.current_key_id}; ${r.remaining} rows remain under other keys` +
          r.failed.map((f) => `\n  could not open ${f.table} ${f.id}`).join('');
        // Rows that would not open need an operator: say so in the exit status too, so a deploy script stops.
        if (r.failed.length) exitCode = 1;
        break;
      }
      default:
        process.stderr.write(`${USAGE}\n`);
        return 2;
    }
    process.stdout.write(values.json ? `${JSON.stringify(out)}\n` : `${human}\n`);
    return exitCode;
  } finally {
    redis.disconnect();
    await ds.destroy();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    const known = err instanceof AdminError || (err instanceof TypeError && 'code' in err);
    process.stderr.write(`error: ${known ? (err as Error).message : 'unexpected failure: ' + (err as Error).message}\n${known ? '' : USAGE + '\n'}`);
    process.exit(known ? 1 : 2);
  },
);
