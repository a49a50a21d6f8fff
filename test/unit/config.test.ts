import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../shared/config.js';

const LIVE = 'legal winner thank year wave sausage worth useful legal winner thank yellow';
// Production requires these of every process that serves (shared/config-processes.ts).
const SERVICES = { DATABASE_URL: 'postgres://db.example/rampway', REDIS_URL: 'redis://redis.example:6379' };

describe('configuration', () => {
  it('refuses wallet seeds that are not valid BIP-39 mnemonics (in a process that reads them)', () => {
    const signer = (env: NodeJS.ProcessEnv) => loadConfig(env, { walletSeeds: true });
    expect(() => signer({ WALLET_SEED_LIVE: 'my live seed' })).to.throw(ConfigError, /WALLET_SEED_LIVE is not a valid BIP-39/);
    expect(() => signer({ WALLET_SEED_LIVE: LIVE.replace('yellow', 'yelow') })).to.throw(ConfigError, /WALLET_SEED_LIVE/);
    expect(() => signer({ WALLET_SEED_LIVE: LIVE.replace('yellow', 'wave') })).to.throw(ConfigError, /checksum/);
    expect(() => signer({ WALLET_SEED: 'abandon abandon' })).to.throw(ConfigError, /WALLET_SEED is not/);
    expect(signer({ WALLET_SEED_LIVE: `  ${LIVE.replace(/ /g, '   ')} ` }).walletSeeds!.live).to.equal(LIVE);
  });

  it('refuses a live seed equal to the sandbox or the public development seed', () => {
    expect(() => loadConfig({ WALLET_SEED_LIVE: 'test test test test test test test test test test test junk' }, { walletSeeds: true })).to.throw(ConfigError, /must differ/);
    expect(() => loadConfig({ WALLET_SEED: LIVE, WALLET_SEED_LIVE: LIVE }, { walletSeeds: true })).to.throw(ConfigError, /must differ/);
  });

  it('production needs every secret', () => {
    expect(() => loadConfig({ NODE_ENV: 'production', WALLET_SEED_LIVE: LIVE })).to.throw(ConfigError, /IDEMPOTENCY_SECRET/);
  });

  it('refuses WEBHOOKS_ALLOW_LOOPBACK=true in production, before anything else it would also ask for', () => {
    expect(loadConfig({ WEBHOOKS_ALLOW_LOOPBACK: 'true' }).webhooks.allowLoopback).to.equal(true);
    expect(() => loadConfig({ NODE_ENV: 'production', WEBHOOKS_ALLOW_LOOPBACK: 'true' })).to.throw(ConfigError, /WEBHOOKS_ALLOW_LOOPBACK=true .* NODE_ENV=production refuses it/);
    const secrets = { ...SERVICES, ENCRYPTION_KEYS: `prod:${Buffer.alloc(32, 1).toString('base64')}`, WALLET_SEED: 'test test test test test test test test test test test junk', WALLET_SEED_LIVE: LIVE, IDEMPOTENCY_SECRET: 'x'.repeat(32) };
    expect(() => loadConfig({ NODE_ENV: 'production', ...secrets, WEBHOOKS_ALLOW_LOOPBACK: 'true' })).to.throw(ConfigError, /WEBHOOKS_ALLOW_LOOPBACK/);
    // A process that signs (the settlement pool) needs only the seeds among the wallet settings.
    expect(loadConfig({ NODE_ENV: 'production', ...secrets, WEBHOOKS_ALLOW_LOOPBACK: 'false' }, { walletSeeds: true }).webhooks.allowLoopback).to.equal(false);
  });

  it('live secrets default to unset, never to public development values', () => {
    const config = loadConfig({}, { walletSeeds: true });
    expect(config.walletSeeds!.live).to.equal(null);
    expect(config.wallets.live).to.equal(null);
    expect(loadConfig({}).wallets.live).to.equal(null);
    expect(config.encryptionKeysConfigured).to.equal(false);
  });

  it('knows the development encryption key by its bytes, under any id, and production refuses it first', () => {
    const dev = Buffer.alloc(32, 7).toString('base64');
    const mine = Buffer.alloc(32, 1).toString('base64');
    expect(loadConfig({ ENCRYPTION_KEYS: `renamed:${dev}` }).encryptionKeysConfigured).to.equal(false);
    expect(loadConfig({ ENCRYPTION_KEYS: `dev1:${dev},k2:${mine}` }).encryptionKeysConfigured).to.equal(false);
    expect(loadConfig({ ENCRYPTION_KEYS: `k2:${mine},dev1:${dev}` }).encryptionKeysConfigured).to.equal(true);
    const secrets = { ...SERVICES, WALLET_SEED: 'test test test test test test test test test test test junk', WALLET_SEED_LIVE: LIVE, IDEMPOTENCY_SECRET: 'x'.repeat(32) };
    expect(() => loadConfig({ NODE_ENV: 'production', ...secrets, ENCRYPTION_KEYS: `prod:${dev}` }, { walletSeeds: true })).to.throw(ConfigError, /public development key/);
    expect(loadConfig({ NODE_ENV: 'production', ...secrets, ENCRYPTION_KEYS: `prod:${mine},dev1:${dev}` }, { walletSeeds: true }).encryptionKeys[0].id).to.equal('prod');
  });

  it('checksums USDC address overrides and refuses malformed ones', () => {
    const lower = '0x833589fcd6edb6e08f4c7c32d4f71b54bda02913';
    expect(loadConfig({ USDC_ADDRESS_BASE: lower }).chains.base.usdcAddress).to.equal('0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913');
    expect(() => loadConfig({ USDC_ADDRESS_POLYGON: '0x1234' })).to.throw(ConfigError, /USDC_ADDRESS_POLYGON/);
    expect(() => loadConfig({ USDC_ADDRESS_BASE: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02914'.replace('fCD', 'fcD') })).to.throw(ConfigError, /checksum/);
  });

  it('reads TRUST_PROXY as a boolean, a hop count or proxy addresses, and refuses anything else at boot', () => {
    expect(loadConfig({ TRUST_PROXY: 'TRUE' }).trustProxy).to.equal(true);
    expect(loadConfig({ TRUST_PROXY: 'false' }).trustProxy).to.equal(false);
    expect(loadConfig({}).trustProxy).to.equal(false);
    expect(loadConfig({ TRUST_PROXY: '1' }).trustProxy).to.equal(1);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, loopback,2001:db8::/32' }).trustProxy).to.equal('10.0.0.0/8,loopback,2001:db8::/32');
    for (const bad of ['yes', '10.0.0.0/33', '10.0.0.300', 'loopback,proxy.example.com']) {
      expect(() => loadConfig({ TRUST_PROXY: bad }), bad).to.throw(ConfigError, /TRUST_PROXY/);
    }
  });

  it('reads the gas top-up per chain: defaults, wei overrides, 0 turning top-ups off, and no target below the minimum', () => {
    const defaults = loadConfig({}).chains;
    expect(defaults.base).to.include({ gasTopupMinWei: 20_000_000_000_000n, gasTopupTargetWei: 100_000_000_000_000n });
    expect(defaults.polygon.gasTopupMinWei).to.equal(50_000_000_000_000_000n);
    expect(loadConfig({ GAS_TOPUP_MIN_WEI_BASE: '5', GAS_TOPUP_TARGET_WEI_BASE: '7' }).chains.base).to.include({ gasTopupMinWei: 5n, gasTopupTargetWei: 7n });
    expect(loadConfig({ GAS_TOPUP_TARGET_WEI_BASE: '0' }).chains.base.gasTopupTargetWei).to.equal(0n);
    expect(() => loadConfig({ GAS_TOPUP_MIN_WEI_BASE: '10', GAS_TOPUP_TARGET_WEI_BASE: '9' })).to.throw(ConfigError, /GAS_TOPUP_TARGET_WEI_BASE must be 0 .* or at least GAS_TOPUP_MIN_WEI_BASE/);
    expect(() => loadConfig({ GAS_TOPUP_MIN_WEI_ARBITRUM: '1e18' })).to.throw(ConfigError, /GAS_TOPUP_MIN_WEI_ARBITRUM must be a whole number of wei/);
  });

  it('CONTRACT 18 defaults: 2 exports at once per key, an export ended after a 30 s stall, 32 webhook deliveries per business', () => {
    const config = loadConfig({});
    expect({ exportsPerKey: config.exportsPerKey, exportStallMs: config.exportStallMs, businessConcurrency: config.webhooks.businessConcurrency })
      .to.deep.equal({ exportsPerKey: 2, exportStallMs: 30_000, businessConcurrency: 32 });
  });
});
