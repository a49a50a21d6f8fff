import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey, type TestBusiness } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { responseAjv } from '../fuzz/operations.js';
import type { Address } from 'viem';
import { deployTestUsdc, mintUsdc, startAnvil, type Anvil } from '../helpers/chain.js';
import { treasuryAddress } from '../../shared/chain/hd-wallet.js';
import { walletKeyEnv } from '../helpers/wallets.js';

const PATH = '/api/v1/business/onramps/readiness';
const CHECKS = ['callback_url', 'chain_rpc', 'daraja_credentials', 'rate_source', 'treasury_wallet'];

// Distinctive values, so a leak into a response is easy to see.
const SECRETS = {
  DARAJA_CONSUMER_KEY: 'ck-7f3a9e1b2c4d',
  DARAJA_CONSUMER_SECRET: 'cs-5e8d2a7b9f0c',
  DARAJA_SHORTCODE: '174379',
  DARAJA_PASSKEY: 'pk-bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919',
  DARAJA_CALLBACK_TOKEN: 'cbtok_Qx81mZr0aLs94Kd2Wn7y',
  DARAJA_B2C_SHORTCODE: '600981',
  DARAJA_INITIATOR_NAME: 'rampway-initiator',
  DARAJA_SECURITY_CREDENTIAL: 'sc-Zm9vYmFyYmF6cXV4',
};
const UNCONFIGURED = {
  RPC_URL_BASE: '', WALLET_XPUB_LIVE: '', WALLET_TREASURY_ADDRESS_LIVE: '', PUBLIC_BASE_URL: '', RATE_SOURCE_URL: '',
  DARAJA_CONSUMER_KEY: '', DARAJA_CONSUMER_SECRET: '', DARAJA_SHORTCODE: '', DARAJA_PASSKEY: '', DARAJA_CALLBACK_TOKEN: '',
  DARAJA_B2C_SHORTCODE: '', DARAJA_INITIATOR_NAME: '', DARAJA_SECURITY_CREDENTIAL: '',
};

/** A rate source that answers KES fresh under /, and a rate ten minutes old under /stale. */
async function startRateSource(): Promise<{ url: string; requests: string[]; server: Server }> {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    const url = new URL(req.url!, 'http://rates.test');
    const stale = url.pathname.startsWith('/stale/');
    const asOf = new Date(Date.now() - (stale ? 600_000 : 1_000)).toISOString();
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ base: url.searchParams.get('base'), quote: url.searchParams.get('quote'), rate: '129.35', as_of: asOf }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests, server };
}

/** Rows of every business-scoped table that belong to the business, plus its own row's updated_at. */
async function footprint(businessId: string): Promise<Record<string, unknown>> {
  const ds = await getDs();
  const tables: { table_name: string }[] = await ds.query(
    `SELECT table_name FROM information_schema.columns WHERE column_name = 'business_id' AND table_schema = 'public' ORDER BY 1`,
  );
  const out: Record<string, unknown> = {};
  for (const { table_name: t } of tables) out[t] = Number((await ds.query(`SELECT count(*) AS n FROM "${t}" WHERE business_id = $1`, [businessId]))[0].n);
  out.business = (await ds.query(`SELECT updated_at, platform_fee_bps, live_enabled FROM businesses WHERE id = $1`, [businessId]))[0];
  return out;
}

describe('GET /api/v1/business/onramps/readiness', function () {
  this.timeout(60_000);
  let api: ApiHarness;
  let biz: TestBusiness;
  let validate: (body: unknown) => void;
  before(async () => {
    api = await startApi();
    biz = await makeBusiness();
    const ajv = responseAjv((await api.http.get('/openapi.json')).body);
    const fn = ajv.compile({ $ref: 'openapi.json#/components/schemas/OnrampReadiness' });
    validate = (body) => void (fn(body) || expect.fail(JSON.stringify(fn.errors)));
  });
  after(() => api.close());

  it('sandbox: enabled, the sandbox provider, base USDC, the currencies with an on-ramp corridor, nothing to check', async () => {
    const res = await api.http.get(PATH).set(bearer(biz.sandboxKey));
    expect(res.status).to.equal(200);
    validate(res.body);
    expect(res.body).to.deep.equal({ environment: 'sandbox', enabled: true, provider: 'sandbox', providers: ['sandbox'], chain: 'base', asset: 'USDC', currencies: ['KES', 'UGX', 'RWF', 'GHS'], checks: {} });
  });

  it('needs transactions:read', async () => {
    const without = await makeKey(biz.businessId, { scopes: ['customers:read', 'transactions:write'] });
    const denied = await api.http.get(PATH).set(bearer(without.key));
    expect(denied.status).to.equal(403);
    expect(denied.body.error).to.include({ code: 'insufficient_scope' });
    expect(denied.body.error.details).to.deep.equal({ required_scope: 'transactions:read' });
    const only = await makeKey(biz.businessId, { environment: 'live', scopes: ['transactions:read'] });
    expect((await api.http.get(PATH).set(bearer(only.key))).status).to.equal(200);
    const op = (await api.http.get('/openapi.json')).body.paths[PATH].get;
    expect(op['x-required-scope']).to.equal('transactions:read');
  });

  it('live, nothing configured: every check fails and names what is missing', async () => {
    const bare = await startApi({ env: UNCONFIGURED });
    try {
      const res = await bare.http.get(PATH).set(bearer(biz.liveKey));
      expect(res.status).to.equal(200);
      validate(res.body);
      expect(res.body).to.include({ environment: 'live', enabled: false, provider: 'mpesa_daraja', chain: 'base', asset: 'USDC' });
      expect(res.body.currencies).to.deep.equal(['KES']);
      expect(Object.keys(res.body.checks).sort()).to.deep.equal(CHECKS);
      for (const name of CHECKS) expect(res.body.checks[name].ok, name).to.equal(false);
      expect(res.body.checks.chain_rpc.message).to.match(/RPC_URL_BASE is not set/);
      expect(res.body.checks.treasury_wallet.message).to.match(/WALLET_XPUB_LIVE and WALLET_TREASURY_ADDRESS_LIVE are not set/);
      expect(res.body.checks.daraja_credentials.message).to.equal(
        'DARAJA_CONSUMER_KEY, DARAJA_CONSUMER_SECRET, DARAJA_SHORTCODE, DARAJA_PASSKEY, DARAJA_B2C_SHORTCODE, DARAJA_INITIATOR_NAME, DARAJA_SECURITY_CREDENTIAL are not set.',
      );
      expect(res.body.checks.callback_url.message).to.equal('PUBLIC_BASE_URL, DARAJA_CALLBACK_TOKEN are not set.');
      expect(res.body.checks.rate_source.message).to.equal('RATE_SOURCE_URL is not set.');
    } finally {
      await bare.close();
    }
  });

  describe('live, configured', () => {
    let anvil: Anvil;
    let usdc: string;
    let rates: Awaited<ReturnType<typeof startRateSource>>;
    before(async () => {
      [anvil, rates] = await Promise.all([startAnvil(), startRateSource()]);
      usdc = await deployTestUsdc(anvil);
      // The treasury hot wallet live on-ramps deliver from: some USDC and some gas.
      const treasury = treasuryAddress(process.env.WALLET_SEED_LIVE!);
      await mintUsdc(anvil, usdc as Address, treasury, 1_000_000n);
      await anvil.walletClient.sendTransaction({ account: anvil.deployer, to: treasury, value: 10n ** 16n, chain: anvil.chain });
    });
    after(async () => {
      await anvil?.stop();
      await new Promise((resolve) => rates?.server.close(resolve));
    });

    const configured = () => ({
      ...SECRETS,
      RPC_URL_BASE: anvil.rpcUrl,
      USDC_ADDRESS_BASE: usdc,
      PUBLIC_BASE_URL: 'https://api.rampway.test',
      RATE_SOURCE_URL: rates.url,
    });

    async function readiness(env: Record<string, string>, key = biz.liveKey) {
      const h = await startApi({ env });
      try {
        const res = await h.http.get(PATH).set(bearer(key));
        expect(res.status).to.equal(200);
        validate(res.body);
        for (const secret of Object.values(SECRETS)) expect(JSON.stringify(res.body)).not.to.contain(secret);
        expect(JSON.stringify(res.body)).not.to.contain(anvil.rpcUrl);
        return res.body;
      } finally {
        await h.close();
      }
    }

    it('is enabled when every check passes, and moves nothing: no rows, no provider, only a KES rate read', async () => {
      const before = await footprint(biz.businessId);
      rates.requests.length = 0;
      const body = await readiness(configured());
      expect(body).to.deep.equal({
        environment: 'live', enabled: true, provider: 'mpesa_daraja', providers: ['mpesa_daraja'], chain: 'base', asset: 'USDC', currencies: ['KES'],
        checks: Object.fromEntries(CHECKS.map((name) => [name, { ok: true, message: null }])),
      });
      // Asked again within a few seconds: the outside answers are reused.
      await readiness(configured());
      expect(rates.requests).to.deep.equal(['GET /rates?base=USDC&quote=KES']);
      expect(await footprint(biz.businessId)).to.deep.equal(before);
    });

    it('says which part is wrong, never with a secret in it', async () => {
      const [eoa] = await anvil.walletClient.getAddresses();
      const body = await readiness({
        ...configured(),
        USDC_ADDRESS_BASE: eoa,
        RATE_SOURCE_URL: `${rates.url}/stale`,
      });
      expect(body.enabled).to.equal(false);
      expect(body.checks.chain_rpc).to.deep.equal({ ok: false, message: `USDC_ADDRESS_BASE (${eoa}) holds no contract on base.` });
      expect(body.checks.rate_source.ok).to.equal(false);
      expect(body.checks.rate_source.message).to.match(/KES rate is \d+ s old; RATE_MAX_AGE_SECONDS allows 60 s/);
      expect(body.checks.daraja_credentials).to.deep.equal({ ok: true, message: null });
      expect(body.checks.treasury_wallet.ok).to.equal(false);
    });

    it('a treasury hot wallet without USDC is not ready', async () => {
      const body = await readiness({ ...configured(), ...walletKeyEnv('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about', 'live') });
      expect(body.enabled).to.equal(false);
      expect(body.checks.treasury_wallet.message).to.match(/^The treasury hot wallet \(0x[0-9a-fA-F]{40}\) holds no USDC and no gas on base/);
    });

    it('a half-configured M-Pesa rail refuses to boot, naming what is missing and never a value', async () => {
      const bootError = (env: Record<string, string>) => startApi({ env }).then(async (h) => (await h.close(), ''), (err: Error) => err.message);
      expect(await bootError({ ...configured(), DARAJA_PASSKEY: '' })).to.equal('The M-Pesa Daraja rail is half configured: DARAJA_PASSKEY is missing');
      expect(await bootError({ ...configured(), DARAJA_CALLBACK_TOKEN: 'short/secret' })).to.match(/DARAJA_CALLBACK_TOKEN must be/).and.not.to.contain('short/secret');
    });

    it('an RPC that does not answer, or a rate source that is down, fails within its bound', async () => {
      const started = Date.now();
      const body = await readiness({ ...configured(), RPC_URL_BASE: 'http://127.0.0.1:9', RATE_SOURCE_URL: 'http://127.0.0.1:9' });
      expect(Date.now() - started).to.be.below(4_000);
      expect(body.enabled).to.equal(false);
      expect(body.checks.chain_rpc).to.deep.equal({ ok: false, message: 'The base RPC (RPC_URL_BASE) did not answer within 2 s.' });
      expect(body.checks.rate_source).to.deep.equal({ ok: false, message: 'The rate source (RATE_SOURCE_URL) gave no usable KES rate within 2 s.' });
      for (const name of ['daraja_credentials', 'callback_url']) expect(body.checks[name].ok, name).to.equal(true);
      expect(body.checks.treasury_wallet).to.deep.equal({ ok: false, message: 'The treasury hot wallet\'s balances on base could not be read within 2 s.' });
    });

    it('a sandbox key is not affected by live configuration', async () => {
      const body = await readiness(UNCONFIGURED, biz.sandboxKey);
      expect(body).to.include({ environment: 'sandbox', enabled: true, provider: 'sandbox' });
    });
  });
});
