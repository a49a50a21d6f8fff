import { erc20Abi, parseAbiItem, type Address } from 'viem';
import type { Config } from '../config.js';
import type { Chain } from '../domain/chains.js';
import { ChainUnavailableError, publicClientFor, rpcUrlFor } from './clients.js';

/** The ERC-20 Transfer event, as the watcher and the sender read it from logs and receipts. */
export const TRANSFER_EVENT = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)');

export interface TokenBalance {
  amount: bigint;
  checkedAt: Date;
}

// balanceOf answers are reused for a few seconds: balance polling must not turn into one RPC call per request.
export const BALANCE_CACHE_MS = 5_000;
const MAX_CACHED = 10_000;
const cache = new Map<string, { expires: number; value: Promise<TokenBalance> }>();

function evictExpired(now: number): void {
  if (cache.size < MAX_CACHED) return;
  for (const [key, entry] of cache) if (entry.expires <= now) cache.delete(key);
}

/** USDC `balanceOf(holder)` on the chain's configured token contract, in minor units (6 decimals). */
export async function usdcBalanceOf(config: Config, chain: Chain, holder: Address): Promise<TokenBalance> {
  const client = publicClientFor(config, chain);
  const token = config.chains[chain].usdcAddress as Address;
  const key = `${rpcUrlFor(config, chain)}|${token}|${holder}`;
  const now = Date.now();
  const hit = cache.get(key);
  if (hit && hit.expires > now) return hit.value;
  evictExpired(now);
  // Concurrent readers of one balance share a single call; a failure is not cached.
  const value = client
    .readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [holder] })
    .then((amount) => ({ amount, checkedAt: new Date() }))
    .catch((err: unknown) => {
      cache.delete(key);
      throw new ChainUnavailableError(chain, err instanceof Error ? err.name : 'balanceOf failed');
    });
  cache.set(key, { expires: now + BALANCE_CACHE_MS, value });
  return value;
}
