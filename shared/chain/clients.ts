import { createPublicClient, http, type PublicClient } from 'viem';
import type { Config } from '../config.js';
import type { Chain } from '../domain/chains.js';

/** The chain could not be asked: no RPC configured, or the RPC failed or timed out. */
export class ChainUnavailableError extends Error {
  constructor(readonly chain: Chain, reason: string) {
    super(`${chain}: ${reason}`);
  }
}

// Requests on the API path must fail fast: one attempt, a short timeout.
const RPC_TIMEOUT_MS = 4_000;
const clients = new Map<string, PublicClient>();

/** A public client for the chain's configured RPC (one per URL, reused), or null when none is configured. */
export function publicClientFor(config: Config, chain: Chain): PublicClient | null {
  const rpcUrl = config.chains[chain].rpcUrl;
  if (!rpcUrl) return null;
  let client = clients.get(rpcUrl);
  if (!client) {
    client = createPublicClient({ transport: http(rpcUrl, { timeout: RPC_TIMEOUT_MS, retryCount: 0 }), cacheTime: 0 });
    clients.set(rpcUrl, client);
  }
  return client;
}
