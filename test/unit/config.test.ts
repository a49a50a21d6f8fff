import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../shared/config.js';

const LIVE = 'legal winner thank year wave sausage worth useful legal winner thank yellow';

describe('configuration', () => {
  it('refuses wallet seeds that are not valid BIP-39 mnemonics', () => {
    expect(() => loadConfig({ WALLET_SEED_LIVE: 'my live seed' })).to.throw(ConfigError, /WALLET_SEED_LIVE is not a valid BIP-39/);
    expect(() => loadConfig({ WALLET_SEED_LIVE: LIVE.replace('yellow', 'yelow') })).to.throw(ConfigError, /WALLET_SEED_LIVE/);
    expect(() => loadConfig({ WALLET_SEED_LIVE: LIVE.replace('yellow', 'wave') })).to.throw(ConfigError, /checksum/);
    expect(() => loadConfig({ WALLET_SEED: 'abandon abandon' })).to.throw(ConfigError, /WALLET_SEED is not/);
    expect(loadConfig({ WALLET_SEED_LIVE: `  ${LIVE.replace(/ /g, '   ')} ` }).walletSeeds.live).to.equal(LIVE);
  });

  it('refuses a live seed equal to the sandbox or the public development seed', () => {
    expect(() => loadConfig({ WALLET_SEED_LIVE: 'test test test test test test test test test test test junk' })).to.throw(ConfigError, /must differ/);
    expect(() => loadConfig({ WALLET_SEED: LIVE, WALLET_SEED_LIVE: LIVE })).to.throw(ConfigError, /must differ/);
  });

  it('production needs every secret', () => {
    expect(() => loadConfig({ NODE_ENV: 'production', WALLET_SEED_LIVE: LIVE })).to.throw(ConfigError, /IDEMPOTENCY_SECRET/);
  });

  it('live secrets default to unset, never to public development values', () => {
    const config = loadConfig({});
    expect(config.walletSeeds.live).to.equal(null);
    expect(config.encryptionKeysConfigured).to.equal(false);
  });
});
