import { expect } from 'chai';
import { mnemonicToAccount } from 'viem/accounts';
import { ConfigError, loadConfig } from '../../shared/config.js';
import { DEV_SEED_SANDBOX, DEV_WALLET_SANDBOX } from '../../shared/config-wallets.js';
import { accountXpub, managedWalletAddress, treasuryAddress } from '../../shared/chain/hd-wallet.js';
import { walletKeyEnv } from '../helpers/wallets.js';

const LIVE = 'legal winner thank year wave sausage worth useful legal winner thank yellow';
const SANDBOX = 'abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about';
const SEEDS = { WALLET_SEED: SANDBOX, WALLET_SEED_LIVE: LIVE };
const PUBLIC = { ...walletKeyEnv(SANDBOX, 'sandbox'), ...walletKeyEnv(LIVE, 'live') };

/** An environment that records every variable read from it. */
function watched(env: Record<string, string>): { env: NodeJS.ProcessEnv; read: Set<string> } {
  const read = new Set<string>();
  return { env: new Proxy(env, { get: (target, name) => (typeof name === 'string' && read.add(name), target[name as string]) }), read };
}

describe('wallet keys: who reads the seeds', () => {
  it('a process that does not sign (the web process) never reads WALLET_SEED or WALLET_SEED_LIVE, even when they are set', () => {
    const { env, read } = watched({ ...SEEDS, ...PUBLIC, NODE_ENV: 'production', DATABASE_URL: 'postgres://db.example/rampway', REDIS_URL: 'redis://redis.example:6379', ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 1).toString('base64')}`, IDEMPOTENCY_SECRET: 's' });
    const config = loadConfig(env);
    expect([...read].filter((name) => name.startsWith('WALLET_SEED'))).to.deep.equal([]);
    expect(read).to.include('WALLET_XPUB_LIVE');
    expect(config.walletSeeds).to.equal(null);
    // Its addresses are those the seeds derive (m/44'/60'/0'/0/i; the treasury at m/44'/60'/1'/0/0).
    for (const [environment, seed] of [['sandbox', SANDBOX], ['live', LIVE]] as const) {
      const wallet = config.wallets[environment]!;
      for (const index of [0, 1, 77]) expect(managedWalletAddress(wallet.xpub, index)).to.equal(mnemonicToAccount(seed, { addressIndex: index }).address);
      expect(wallet.treasuryAddress).to.equal(mnemonicToAccount(seed, { path: "m/44'/60'/1'/0/0" }).address);
    }
  });

  it('a process that signs reads the seeds and derives the same public keys from them', () => {
    const { env, read } = watched({ ...SEEDS });
    const config = loadConfig(env, { walletSeeds: true });
    expect(read).to.include('WALLET_SEED_LIVE');
    expect(config.walletSeeds).to.deep.equal({ sandbox: SANDBOX, live: LIVE });
    expect(config.wallets.live).to.deep.equal({ xpub: accountXpub(LIVE), treasuryAddress: treasuryAddress(LIVE) });
    expect(loadConfig({ ...SEEDS, ...PUBLIC }, { walletSeeds: true }).wallets).to.deep.equal(config.wallets);
  });

  it('a seed and public keys that do not match refuse to boot, naming the command that prints the right ones', () => {
    const other = walletKeyEnv(SANDBOX, 'live');
    expect(() => loadConfig({ ...SEEDS, WALLET_XPUB_LIVE: other.WALLET_XPUB_LIVE, WALLET_TREASURY_ADDRESS_LIVE: treasuryAddress(LIVE) }, { walletSeeds: true }))
      .to.throw(ConfigError, /^WALLET_XPUB_LIVE does not match WALLET_SEED_LIVE: npm run admin -- wallet-xpub --environment live/);
    expect(() => loadConfig({ ...SEEDS, WALLET_XPUB_LIVE: accountXpub(LIVE), WALLET_TREASURY_ADDRESS_LIVE: other.WALLET_TREASURY_ADDRESS_LIVE }, { walletSeeds: true }))
      .to.throw(ConfigError, /^WALLET_TREASURY_ADDRESS_LIVE does not match WALLET_SEED_LIVE: npm run admin -- treasury-address/);
    // An xpub without its seed beside it is checked against the seed it stands for: unset, the public development one.
    expect(() => loadConfig({ ...walletKeyEnv(SANDBOX, 'sandbox') }, { walletSeeds: true })).to.throw(ConfigError, /WALLET_XPUB does not match WALLET_SEED \(unset/);
  });

  it('public keys are checked at boot: both or neither, an xpub of the account node, a valid address, live apart from sandbox', () => {
    expect(() => loadConfig({ WALLET_XPUB_LIVE: accountXpub(LIVE) })).to.throw(ConfigError, /WALLET_XPUB_LIVE is set without WALLET_TREASURY_ADDRESS_LIVE/);
    expect(() => loadConfig({ WALLET_TREASURY_ADDRESS_LIVE: treasuryAddress(LIVE) })).to.throw(ConfigError, /WALLET_TREASURY_ADDRESS_LIVE is set without WALLET_XPUB_LIVE/);
    const xprv = mnemonicToAccount(LIVE, { path: "m/44'/60'/0'/0" }).getHdKey().privateExtendedKey;
    expect(() => loadConfig({ ...PUBLIC, WALLET_XPUB_LIVE: xprv })).to.throw(ConfigError, /WALLET_XPUB_LIVE holds a private key/);
    expect(() => loadConfig({ ...PUBLIC, WALLET_TREASURY_ADDRESS: '0x1234' })).to.throw(ConfigError, /WALLET_TREASURY_ADDRESS is not a valid EVM address/);
    expect(() => loadConfig({ ...PUBLIC, ...walletKeyEnv(SANDBOX, 'live') })).to.throw(ConfigError, /WALLET_XPUB_LIVE must differ/);
    expect(() => loadConfig({ ...walletKeyEnv(DEV_SEED_SANDBOX, 'live') })).to.throw(ConfigError, /WALLET_XPUB_LIVE must differ/);
  });

  it('production: a process that does not sign needs the public keys, one that signs needs the seeds', () => {
    const secrets = { NODE_ENV: 'production', DATABASE_URL: 'postgres://db.example/rampway', REDIS_URL: 'redis://redis.example:6379', ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 1).toString('base64')}`, IDEMPOTENCY_SECRET: 's' };
    expect(() => loadConfig({ ...secrets, ...SEEDS })).to.throw(ConfigError, /needs WALLET_XPUB, WALLET_TREASURY_ADDRESS, WALLET_XPUB_LIVE and WALLET_TREASURY_ADDRESS_LIVE/);
    expect(loadConfig({ ...secrets, ...PUBLIC }).wallets.live!.xpub).to.equal(accountXpub(LIVE));
    expect(() => loadConfig({ ...secrets, ...PUBLIC }, { walletSeeds: true })).to.throw(ConfigError, /needs WALLET_SEED and WALLET_SEED_LIVE/);
    expect(loadConfig({ ...secrets, ...SEEDS }, { walletSeeds: true }).walletSeeds!.live).to.equal(LIVE);
  });

  it('outside production the sandbox defaults to the public development key, seed and xpub alike; live to nothing', () => {
    expect(DEV_WALLET_SANDBOX).to.deep.equal({ xpub: accountXpub(DEV_SEED_SANDBOX), treasuryAddress: treasuryAddress(DEV_SEED_SANDBOX) });
    expect(loadConfig({}).wallets).to.deep.equal({ sandbox: DEV_WALLET_SANDBOX, live: null });
    expect(loadConfig({}, { walletSeeds: true }).wallets).to.deep.equal({ sandbox: DEV_WALLET_SANDBOX, live: null });
  });
});
