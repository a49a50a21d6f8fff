import { createPublicClient, http, type PublicClient } from 'viem';
import { arbitrum, avalanche, base, optimism, polygon } from 'viem/chains';
import type { Config } from '../config.js';
import type { Chain } from '../domain/chains.js';

/** The chain could not be asked: the RPC failed or timed out. */
export class ChainUnavailableError extends Error {
  constructor(readonly chain: Chain, reason: string) {
    super(`${chain}: ${reason}`);
  }
}

// Without RPC_URL_<CHAIN>, each chain is read through the public RPC viem ships for it.
const VIEM_CHAINS = { base, polygon, arbitrum, optimism, avalanche } as const satisfies Record<Chain, unknown>;

/** viem's built-in public RPC URL for the chain: the default when RPC_URL_<CHAIN> is unset. */
export function defaultRpcUrl(chain: Chain): string {
  return VIEM_CHAINS[chain].rpcUrls.default.http[0];
}

/** The RPC URL the chain is read through: RPC_URL_<CHAIN> when set, else viem's built-in public RPC. */
export function rpcUrlFor(config: Config, chain: Chain): string {
  return config.chains[chain].rpcUrl || defaultRpcUrl(chain);
}

// Requests on the API path must fail fast: one attempt, a short timeout.
const RPC_TIMEOUT_MS = 4_000;
const clients = new Map<string, PublicClient>();

/** A public client for the chain's RPC (one per URL, reused). */
export function publicClientFor(config: Config, chain: Chain): PublicClient {
  const rpcUrl = rpcUrlFor(config, chain);
  let client = clients.get(rpcUrl);
  if (!client) {
    client = createPublicClient({ transport: http(rpcUrl, { timeout: RPC_TIMEOUT_MS, retryCount: 0 }), cacheTime: 0 });
    clients.set(rpcUrl, client);
  }
  return client;
}

// The settlement pool's scans may wait longer and retry (with viem's backoff): a slow RPC delays a scan, never a request.
const SCAN_TIMEOUT_MS = 15_000;
const scanClients = new Map<string, PublicClient>();

/** The scanning client of a chain, separate from the request path's (it retries and waits longer). */
export function scanClientFor(config: Config, chain: Chain): PublicClient {
  const rpcUrl = rpcUrlFor(config, chain);
  let client = scanClients.get(rpcUrl);
  if (!client) {
    client = createPublicClient({ transport: http(rpcUrl, { timeout: SCAN_TIMEOUT_MS, retryCount: 3, retryDelay: 250 }), cacheTime: 0 });
    scanClients.set(rpcUrl, client);
  }
  return client;
}
