import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { getConfig } from '../../shared/config.js';
import { AdminError, setFees } from '../../shared/admin/commands.js';
import { mnemonicToAccount } from 'viem/accounts';
import { accountXpub, managedWalletAddress, treasuryAddress } from '../../shared/chain/hd-wallet.js';
import { SCOPES } from '../../shared/domain/api-keys.js';

function adminWith(env: Record<string, string>, ...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('node_modules/.bin/tsx', ['scripts/admin.ts', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
const admin = (...args: string[]) => adminWith({}, ...args);

/** A failure as the CLI must report it: the exit status, and one line on stderr matching `message`, no stack trace. */
function expectOneLineError(res: { code: number | null; stderr: string }, code: number, message: RegExp) {
  expect(res.code, res.stderr).to.equal(code);
  expect(res.stderr.trimEnd().split('\n'), res.stderr).to.have.length(1);
  expect(res.stderr).to.match(/^error: /);
  expect(res.stderr).to.match(message);
  expect(res.stderr).not.to.match(/^\s+at |unexpected/m);
}

describe('admin CLI (npm run admin)', function () {
  this.timeout(60_000);
  let api: ApiHarness;
  before(async () => {
    api = await startApi();
  });
  after(() => api.close());

  it('create-business --json prints the business and one sandbox and one live key with every scope', async () => {
    const res = await admin('create-business', '--name', 'CLI Co', '--json');
    expect(res.code, res.stderr).to.equal(0);
    const out = JSON.parse(res.stdout);
    expect(out.name).to.equal('CLI Co');
    expect(out.business_id).to.match(/^[0-9a-f-]{36}$/);
    expect(out.keys.map((k: { environment: string }) => k.environment).sort()).to.deep.equal(['live', 'sandbox']);
    const sandbox = out.keys.find((k: { environment: string }) => k.environment === 'sandbox');
    expect(sandbox.key).to.match(/^svc_test_[A-Za-z0-9_-]{43}$/);
    expect(sandbox.scopes).to.include.members(['customers:write', 'sandbox:write', 'wallets:read']);
    expect(sandbox.allowed_ips).to.deep.equal([]);
    // The key works, and only its hash is stored.
    expect((await api.http.get('/api/v1/business/account').set(bearer(sandbox.key))).status).to.equal(200);
    const rows = await (await getDs()).query(`SELECT key_hash, prefix FROM api_keys WHERE id = $1`, [sandbox.id]);
    expect(rows[0].key_hash).to.match(/^[0-9a-f]{64}$/);
    expect(rows[0].key_hash).not.to.include(sandbox.key.slice(9));
    expect(sandbox.key.startsWith(rows[0].prefix)).to.equal(true);
  });

  it('create-key with scopes, allowed IPs and a rate limit; revoke-key; enable-live', async () => {
    const biz = JSON.parse((await admin('create-business', '--name', 'Keys Co', '--json')).stdout);
    const created = await admin('create-key', '--business', biz.business_id, '--environment', 'live', '--scopes', 'customers:read,wallets:read',
      '--allowed-ips', '127.0.0.1,::1', '--rate-limit', '7', '--rate-window', '10', '--json');
    expect(created.code, created.stderr).to.equal(0);
    const key = JSON.parse(created.stdout);
    expect(key).to.include({ environment: 'live' });
    expect(key.key).to.match(/^svc_live_/);
    expect(key.scopes).to.deep.equal(['customers:read', 'wallets:read']);
    expect(key.allowed_ips).to.deep.equal(['127.0.0.1', '::1']);
    const account = await api.http.get('/api/v1/business/account').set(bearer(key.key));
    expect(account.body.api_key.rate_limit).to.deep.equal({ limit: 7, window_seconds: 10 });
    expect(account.body.live_enabled).to.equal(false);

    expect((await admin('enable-live', '--business', biz.business_id)).code).to.equal(0);
    const [row] = await (await getDs()).query(`SELECT live_enabled FROM businesses WHERE id = $1`, [biz.business_id]);
    expect(row.live_enabled).to.equal(true);

    const revoked = await admin('revoke-key', '--key', key.id, '--json');
    expect(revoked.code, revoked.stderr).to.equal(0);
    expect(JSON.parse(revoked.stdout).id).to.equal(key.id);
    api.keyCache.clear(); // this harness does not subscribe to the change channel
    expect((await api.http.get('/api/v1/business/account').set(bearer(key.key))).status).to.equal(401);
  });

  it('set-fees sets a business\'s platform fee (50 bps and no minimum until then), shown by GET /account', async () => {
    const biz = JSON.parse((await admin('create-business', '--name', 'Fees Co', '--json')).stdout);
    const sandbox = biz.keys.find((k: { environment: string }) => k.environment === 'sandbox');
    const account = () => api.http.get('/api/v1/business/account').set(bearer(sandbox.key));
    expect((await account()).body.fees).to.deep.equal({ platform_bps: 50, platform_min: '0.000000' });

    const set = await admin('set-fees', '--business', biz.business_id, '--platform-bps', '125', '--platform-min', '1.5', '--json');
    expect(set.code, set.stderr).to.equal(0);
    expect(JSON.parse(set.stdout)).to.deep.equal({ business_id: biz.business_id, platform_bps: 125, platform_min: '1.500000' });
    const [row] = await (await getDs()).query(`SELECT platform_fee_bps, platform_fee_min::text AS min FROM businesses WHERE id = $1`, [biz.business_id]);
    expect(row).to.deep.equal({ platform_fee_bps: 125, min: '1.5' });
    api.keyCache.clear(); // this harness does not subscribe to the change channel
    expect((await account()).body.fees).to.deep.equal({ platform_bps: 125, platform_min: '1.500000' });

    // Without --platform-min the minimum stays; the bounds 0 and 10000 bps are allowed; the human answer says what is set.
    const human = await admin('set-fees', '--business', biz.business_id, '--platform-bps', '0');
    expect(human.code, human.stderr).to.equal(0);
    expect(human.stdout).to.equal(`platform fee of business ${biz.business_id}: 0 bps, at least 1.500000 USDC\n`);
    const max = JSON.parse((await admin('set-fees', '--business', biz.business_id, '--platform-bps', '10000', '--platform-min', '0.000001', '--json')).stdout);
    expect(max).to.include({ platform_bps: 10000, platform_min: '0.000001' });
  });

  it('set-fees refuses what is not a fee, and an unknown business, changing nothing', async () => {
    const biz = JSON.parse((await admin('create-business', '--name', 'Bad Fees Co', '--json')).stdout);
    // The CLI: a clear message and exit 1.
    for (const [args, message] of [
      [['--business', biz.business_id, '--platform-bps', '10001'], /--platform-bps must be an integer from 0 to 10000/],
      [['--business', biz.business_id, '--platform-bps', '50', '--platform-min', '0.0000001'], /--platform-min must have at most 6 decimals/],
      [['--business', '00000000-0000-4000-8000-000000000000', '--platform-bps', '75'], /no business 00000000-0000-4000-8000-000000000000/],
    ] as [string[], RegExp][]) {
      const out = await admin('set-fees', ...args);
      expect(out.code, `${args.join(' ')}: ${out.stderr}`).to.equal(1);
      expect(out.stderr).to.match(message);
      expect(out.stderr).not.to.match(/unexpected|usage/);
    }
    // The same command in-process, for the rest of the rules.
    const deps = { ds: await getDs(), config: getConfig() };
    const cases: [Parameters<typeof setFees>[1], RegExp][] = [
      [{ businessId: biz.business_id, platformBps: '12.5' }, /--platform-bps must be an integer from 0 to 10000/],
      [{ businessId: biz.business_id, platformBps: 'fifty' }, /--platform-bps must be an integer from 0 to 10000/],
      [{ businessId: biz.business_id, platformBps: '-1' }, /--platform-bps must be an integer from 0 to 10000/],
      [{ businessId: biz.business_id, platformBps: -1 }, /--platform-bps must be an integer from 0 to 10000/],
      [{ businessId: biz.business_id, platformBps: undefined }, /--platform-bps is required/],
      [{ businessId: biz.business_id, platformBps: '50', platformMin: '1e3' }, /--platform-min must be a decimal amount in USDC/],
      [{ businessId: biz.business_id, platformBps: '50', platformMin: '-1' }, /--platform-min must be a decimal amount in USDC/],
      [{ businessId: biz.business_id, platformBps: '50', platformMin: '01.5' }, /--platform-min must be a decimal amount in USDC/],
      [{ businessId: biz.business_id, platformBps: '50', platformMin: '1000000000' }, /--platform-min must be below/],
      [{ businessId: 'acme', platformBps: '50' }, /--business must be a business id/],
    ];
    for (const [opts, message] of cases) {
      const err = await setFees(deps, opts).then(() => null, (e: unknown) => e);
      expect(err, JSON.stringify(opts)).to.be.instanceOf(AdminError);
      expect((err as Error).message).to.match(message);
    }
    const [row] = await (await getDs()).query(`SELECT platform_fee_bps, platform_fee_min::text AS min FROM businesses WHERE id = $1`, [biz.business_id]);
    expect(row).to.deep.equal({ platform_fee_bps: 50, min: '0' });
  });

  it('refuses bad input with a clear message and a non-zero exit', async () => {
    const unknownScope = await admin('create-key', '--business', '00000000-0000-4000-8000-000000000000', '--environment', 'sandbox', '--scopes', 'money:print');
    expect(unknownScope.code).to.not.equal(0);
    expect(unknownScope.stderr).to.match(/unknown scope "money:print"/);
    const badIp = await admin('create-key', '--business', '00000000-0000-4000-8000-000000000000', '--environment', 'sandbox', '--allowed-ips', '1.2.3.999');
    expect(badIp.stderr).to.match(/not an IPv4 or IPv6 address/);
    for (const [flag, value] of [['--rate-limit', '99999999999'], ['--rate-window', '86401'], ['--rate-limit', '0']]) {
      const out = await admin('create-key', '--business', '00000000-0000-4000-8000-000000000000', '--environment', 'sandbox', flag, value);
      expect(out.code, out.stderr).to.equal(1);
      expect(out.stderr).to.match(new RegExp(`${flag} must be an integer from 1 to`));
      expect(out.stderr).not.to.match(/unexpected|out of range for type/);
    }
    const noBiz = await admin('revoke-key', '--key', '00000000-0000-4000-8000-000000000000');
    expect(noBiz.code).to.not.equal(0);
    expect(noBiz.stderr).to.match(/no API key/);
    const usage = await admin('frobnicate');
    expect(usage.code).to.equal(2);
    expect(usage.stderr).to.match(/usage: npm run admin/);
  });
  it('--scopes takes resource:* and * as the README writes them, and refuses a scope it does not know', async () => {
    const biz = JSON.parse((await admin('create-business', '--name', 'Scopes Co', '--json')).stdout);
    const scopesOf = async (scopes: string) => {
      const res = await admin('create-key', '--business', biz.business_id, '--environment', 'sandbox', '--scopes', scopes, '--json');
      expect(res.code, res.stderr).to.equal(0);
      return JSON.parse(res.stdout).scopes;
    };
    expect(await scopesOf('customers:*')).to.deep.equal(['customers:read', 'customers:write']);
    expect(await scopesOf('customers:*, wallets:read,customers:read')).to.deep.equal(['customers:read', 'customers:write', 'wallets:read']);
    expect(await scopesOf('payment_intents:*,treasury:*')).to.deep.equal(['payment_intents:read', 'payment_intents:write', 'treasury:read', 'treasury:write']);
    expect(await scopesOf('*')).to.deep.equal([...SCOPES]);
    await Promise.all(['money:*', 'customers:admin', 'customers*', ':*', 'customers:read,nope'].map(async (scopes) => {
      const res = await admin('create-key', '--business', biz.business_id, '--environment', 'sandbox', '--scopes', scopes);
      expectOneLineError(res, 1, /unknown scope ".+"; known: customers:read/);
    }));
    expectOneLineError(await admin('create-key', '--business', biz.business_id, '--environment', 'sandbox', '--scopes', ''), 1, /--scopes names no scope/);
    const [{ n }] = await (await getDs()).query(`SELECT count(*)::int AS n FROM api_keys WHERE business_id = $1`, [biz.business_id]);
    expect(n).to.equal(2 + 4); // the two of create-business and the four above: nothing from the refusals
  });

  it('--help prints usage and exits 0, for the CLI and for each command, without touching the database', async () => {
    const down = { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/rampway', REDIS_URL: 'redis://127.0.0.1:1' };
    await Promise.all([['--help'], ['-h'], ['help']].map(async (args) => {
      const res = await adminWith(down, ...args);
      expect(res.code, res.stderr).to.equal(0);
      expect(res.stdout).to.match(/^usage: npm run admin -- <command>/);
      for (const command of ['create-business', 'create-key', 'revoke-key', 'enable-live', 'set-fees', 'list-businesses', 'list-keys', 'treasury-address', 'rotate-encryption-key']) {
        expect(res.stdout, command).to.include(`  ${command} `);
      }
      expect(res.stderr).to.equal('');
    }));
    await Promise.all([['list-keys', '--help'], ['list-keys', '--business', 'x', '-h'], ['help', 'list-keys']].map(async (args) => {
      const res = await adminWith(down, ...args);
      expect(res.code, res.stderr).to.equal(0);
      expect(res.stdout).to.match(/^usage: npm run admin -- list-keys --business ID \[--json\]\n/);
    }));
  });

  it('an unknown command or flag prints a one-line error and usage, exit 2; every other failure one line, exit 1', async () => {
    for (const args of [['frobnicate'], []]) {
      const res = await admin(...args);
      expect(res.code).to.equal(2);
      const [first, ...usage] = res.stderr.trimEnd().split('\n');
      expect(first).to.match(args.length ? /^error: unknown command "frobnicate"$/ : /^error: a command is required$/);
      expect(usage.join('\n')).to.match(/^usage: npm run admin -- <command>/);
      expect(res.stderr).not.to.match(/^\s+at /m);
    }
    await Promise.all(([
      [['revoke-key', '--bogus', '1'], /^error: revoke-key: Unknown option '--bogus'$/],
      [['revoke-key', '--key'], /^error: revoke-key: Option '--key <value>' argument missing$/],
      [['revoke-key', 'abc'], /^error: revoke-key: Unexpected argument 'abc'$/],
      [['create-business', '--business', 'x'], /^error: create-business: Unknown option '--business'$/],
    ] as [string[], RegExp][]).map(async ([args, message]) => {
      const res = await admin(...args);
      expect(res.code, args.join(' ')).to.equal(2);
      expect(res.stderr.split('\n')[0]).to.match(message);
      expect(res.stderr.split('\n')[1]).to.equal(`usage: npm run admin -- ${args[0]} ${args[0] === 'revoke-key' ? '--key ID [--json]' : '--name NAME [--json]'}`);
    }));
    const nobody = '00000000-0000-4000-8000-000000000000';
    await Promise.all(([
      [['list-keys', '--business', nobody], /no business 0{8}-/],
      [['enable-live', '--business', nobody], /no business 0{8}-/],
      [['list-keys', '--business', 'acme'], /--business must be a business id \(UUID\)/],
      [['create-key', '--business', nobody, '--environment', 'moon'], /--environment must be sandbox or live/],
      [['create-key', '--business', nobody, '--environment', 'sandbox', '--rate-limit', 'lots'], /--rate-limit must be an integer from 1 to/],
      [['treasury-address', '--environment', 'moon'], /--environment must be sandbox or live/],
    ] as [string[], RegExp][]).map(async ([args, message]) => expectOneLineError(await admin(...args), 1, message)));
    // PostgreSQL down, or the database missing: where, and what to do.
    expectOneLineError(await adminWith({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/rampway' }, 'list-businesses'), 1,
      /PostgreSQL is unreachable at 127\.0\.0\.1:1 \(.*ECONNREFUSED.*\); start it there, or set DATABASE_URL/);
    const missing = new URL(process.env.DATABASE_URL!);
    missing.pathname = '/rampway_no_such_db';
    expectOneLineError(await adminWith({ DATABASE_URL: missing.toString() }, 'list-keys', '--business', nobody), 1,
      /database "rampway_no_such_db" does not exist at .*; npm run migrate creates it/);
    // A configuration the service would refuse at boot: its own message, on one line.
    expectOneLineError(await adminWith({ ENCRYPTION_KEYS: 'nonsense' }, 'list-businesses'), 1, /ENCRYPTION_KEYS entries are/);
  });

  it('revoke-key with Redis down revokes, and warns naming the Redis of REDIS_URL (not the default)', async () => {
    const biz = JSON.parse((await admin('create-business', '--name', 'Redis Down Co', '--json')).stdout);
    const res = await adminWith({ REDIS_URL: 'redis://127.0.0.1:1' }, 'revoke-key', '--key', biz.keys[0].id);
    expect(res.code, res.stderr).to.equal(0);
    expect(res.stdout).to.match(/^revoked key /);
    expect(res.stderr.trimEnd().split('\n')).to.have.length(1);
    expect(res.stderr).to.match(/^warning: Redis is unreachable at 127\.0\.0\.1:1 \(REDIS_URL\)/);
    expect(res.stderr).not.to.include('6379');
    const [row] = await (await getDs()).query(`SELECT revoked_at FROM api_keys WHERE id = $1`, [biz.keys[0].id]);
    expect(row.revoked_at).to.be.instanceOf(Date);
  });

  it('list-businesses and list-keys show what an operator needs, never a key or its hash', async () => {
    const biz = JSON.parse((await admin('create-business', '--name', 'Listed Co', '--json')).stdout);
    const extra = JSON.parse((await admin('create-key', '--business', biz.business_id, '--environment', 'sandbox', '--scopes', 'wallets:*',
      '--allowed-ips', '10.0.0.1', '--rate-limit', '5', '--rate-window', '30', '--json')).stdout);
    expect((await admin('revoke-key', '--key', biz.keys[1].id)).code).to.equal(0);

    const businesses = await admin('list-businesses', '--json');
    expect(businesses.code, businesses.stderr).to.equal(0);
    const listed = JSON.parse(businesses.stdout).find((b: { id: string }) => b.id === biz.business_id);
    expect(listed).to.deep.include({ name: 'Listed Co', status: 'active', live_enabled: false, platform_bps: 50, platform_min: '0.000000' });
    expect(new Date(listed.created_at).toISOString()).to.equal(listed.created_at);
    const human = await admin('list-businesses');
    expect(human.stdout).to.match(new RegExp(`^${biz.business_id}  Listed Co +active +sandbox only`, 'm'));

    const keys = await admin('list-keys', '--business', biz.business_id, '--json');
    expect(keys.code, keys.stderr).to.equal(0);
    const out = JSON.parse(keys.stdout);
    expect(out.map((k: { id: string }) => k.id)).to.deep.equal([biz.keys[0].id, biz.keys[1].id, extra.id]);
    for (const k of out) {
      expect(k).to.have.all.keys('id', 'environment', 'prefix', 'scopes', 'allowed_ips', 'rate_limit', 'revoked', 'revoked_at', 'created_at');
    }
    expect(out[1]).to.include({ environment: biz.keys[1].environment, revoked: true });
    expect(out[1].revoked_at).to.be.a('string');
    expect(out[2]).to.deep.include({ environment: 'sandbox', scopes: ['wallets:read', 'wallets:write'], allowed_ips: ['10.0.0.1'], rate_limit: { limit: 5, window_seconds: 30 }, revoked: false, revoked_at: null });
    expect(extra.key.startsWith(out[2].prefix)).to.equal(true);
    const humanKeys = await admin('list-keys', '--business', biz.business_id);
    expect(humanKeys.code, humanKeys.stderr).to.equal(0);
    expect(humanKeys.stdout).to.match(new RegExp(`^${extra.id}  sandbox .* active .* 10\\.0\\.0\\.1 +wallets:read,wallets:write$`, 'm'));
    expect(humanKeys.stdout).to.match(new RegExp(`^${biz.keys[1].id} .* revoked `, 'm'));
    const hashes: { key_hash: string }[] = await (await getDs()).query(`SELECT key_hash FROM api_keys WHERE business_id = $1`, [biz.business_id]);
    for (const text of [keys.stdout, humanKeys.stdout]) {
      for (const secret of [...biz.keys.map((k: { key: string }) => k.key), extra.key]) expect(text).not.to.include(secret.slice(15));
      for (const { key_hash } of hashes) expect(text).not.to.include(key_hash);
    }
  });

  it('treasury-address prints each environment\'s treasury hot wallet; live without WALLET_SEED_LIVE is a clear error', async () => {
    const config = getConfig();
    const sandbox = await admin('treasury-address', '--environment', 'sandbox');
    expect(sandbox.code, sandbox.stderr).to.equal(0);
    expect(sandbox.stdout).to.equal(`${treasuryAddress(config.walletSeeds!.sandbox)}\n`);
    const live = await admin('treasury-address', '--environment', 'live', '--json');
    expect(live.code, live.stderr).to.equal(0);
    expect(JSON.parse(live.stdout)).to.deep.equal({ environment: 'live', address: treasuryAddress(config.walletSeeds!.live!), path: "m/44'/60'/1'/0/0" });
    expect(JSON.parse(live.stdout).address).not.to.equal(treasuryAddress(config.walletSeeds!.sandbox));
    // No database is needed to derive it.
    const noDb = await adminWith({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/rampway' }, 'treasury-address', '--environment', 'sandbox');
    expect(noDb.code, noDb.stderr).to.equal(0);
    expectOneLineError(await adminWith({ WALLET_SEED_LIVE: '' }, 'treasury-address', '--environment', 'live'), 1, /WALLET_SEED_LIVE is not set/);
  });

  it('wallet-xpub prints the account xpub processes without the seed derive addresses from; a public key the seed disagrees with stops it', async () => {
    const config = getConfig();
    const [sandbox, live] = await Promise.all([admin('wallet-xpub', '--environment', 'sandbox'), admin('wallet-xpub', '--environment', 'live', '--json')]);
    expect(sandbox.code, sandbox.stderr).to.equal(0);
    expect(sandbox.stdout).to.equal(`${accountXpub(config.walletSeeds!.sandbox)}\n`);
    expect(live.code, live.stderr).to.equal(0);
    expect(JSON.parse(live.stdout)).to.deep.equal({ environment: 'live', xpub: accountXpub(config.walletSeeds!.live!), path: "m/44'/60'/0'/0" });
    expect(managedWalletAddress(JSON.parse(live.stdout).xpub, 5)).to.equal(mnemonicToAccount(config.walletSeeds!.live!, { addressIndex: 5 }).address);
    expectOneLineError(await adminWith({ WALLET_XPUB_LIVE: accountXpub('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about') }, 'wallet-xpub', '--environment', 'live'), 1,
      /WALLET_XPUB_LIVE does not match WALLET_SEED_LIVE/);
  });
});
