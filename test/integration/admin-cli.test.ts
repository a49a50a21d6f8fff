import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { getConfig } from '../../shared/config.js';
import { AdminError, setFees } from '../../shared/admin/commands.js';

function admin(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('node_modules/.bin/tsx', ['scripts/admin.ts', ...args], { env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
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
});
