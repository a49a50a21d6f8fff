import { expect } from 'chai';
import { arbitrum, avalanche, base, optimism, polygon } from 'viem/chains';
import { defaultRpcUrl, publicClientFor, rpcUrlFor } from '../../shared/chain/clients.js';
import { loadConfig } from '../../shared/config.js';
import { CHAINS, CHAIN_IDS } from '../../shared/domain/chains.js';

const VIEM = { base, polygon, arbitrum, optimism, avalanche };

/** The test environment without any RPC_URL_<CHAIN>: what an operator gets out of the box. */
function envWithoutRpcOverrides(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const chain of CHAINS) delete env[`RPC_URL_${chain.toUpperCase()}`];
  return env;
}

describe('chain RPC selection', () => {
  const realFetch = globalThis.fetch;
  let fetched: string[];
  beforeEach(() => {
    // Nothing here may reach the network: any request would be recorded and refused.
    fetched = [];
    globalThis.fetch = (async (input: string | URL | Request) => {
      fetched.push(String(input instanceof Request ? input.url : input));
      throw new Error('network access in a unit test');
    }) as typeof fetch;
  });
  afterEach(() => {
    globalThis.fetch = realFetch;
    expect(fetched).to.deep.equal([]);
  });

  it('defaults every chain to viem\'s built-in public RPC for that chain', () => {
    const config = loadConfig(envWithoutRpcOverrides());
    for (const chain of CHAINS) {
      expect(VIEM[chain].id, chain).to.equal(CHAIN_IDS[chain]);
      const expected = VIEM[chain].rpcUrls.default.http[0];
      expect(expected, chain).to.match(/^https:\/\//);
      expect(config.chains[chain].rpcUrl, chain).to.equal(null);
      expect(defaultRpcUrl(chain), chain).to.equal(expected);
      expect(rpcUrlFor(config, chain), chain).to.equal(expected);
      expect(publicClientFor(config, chain).transport.url, chain).to.equal(expected);
    }
  });

  it('uses RPC_URL_<CHAIN> where set, per chain', () => {
    const config = loadConfig({ ...envWithoutRpcOverrides(), RPC_URL_POLYGON: 'http://127.0.0.1:8545' });
    expect(rpcUrlFor(config, 'polygon')).to.equal('http://127.0.0.1:8545');
    expect(publicClientFor(config, 'polygon').transport.url).to.equal('http://127.0.0.1:8545');
    expect(rpcUrlFor(config, 'base')).to.equal(base.rpcUrls.default.http[0]);
  });

  it('reuses one client per URL', () => {
    const config = loadConfig(envWithoutRpcOverrides());
    expect(publicClientFor(config, 'base')).to.equal(publicClientFor(loadConfig(envWithoutRpcOverrides()), 'base'));
    expect(publicClientFor(config, 'base')).not.to.equal(publicClientFor(config, 'optimism'));
  });

  it('keeps the test run off public RPCs: every chain points at this machine unless a test says otherwise', () => {
    const config = loadConfig(process.env);
    for (const chain of CHAINS) expect(new URL(rpcUrlFor(config, chain)).hostname, chain).to.equal('127.0.0.1');
  });
});
