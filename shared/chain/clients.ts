import { BaseError, BlockNotFoundError, createPublicClient, http, TransactionNotFoundError, TransactionReceiptNotFoundError, type PublicClient } from 'viem';
import { arbitrum, avalanche, base, optimism, polygon } from 'viem/chains';
import type { Config } from '../config.js';
import type { Chain } from '../domain/chains.js';

/** The chain could not be asked: the RPC failed or timed out. */
export class ChainUnavailableError extends Error {
  constructor(readonly chain: Chain, reason: string) {
    super(`${chain}: ${reason}`);
  }
}

/**
 * A lookup whose "not there" is an answer: viem's not-found error for a null result (a receipt, a transaction, a
 * block the node says it does not have) becomes null. Any other error (a timeout, a rate limit, a node that failed)
 * says nothing about the chain: it is thrown as ChainUnavailableError, "unknown", to be checked again later.
 */
export async function absentAsNull<T>(chain: Chain, lookup: Promise<T>): Promise<T | null> {
  try {
    return await lookup;
  } catch (err) {
    if (err instanceof TransactionReceiptNotFoundError || err instanceof TransactionNotFoundError || err instanceof BlockNotFoundError) return null;
    throw unknownChainAnswer(chain, err);
  }
}

/** An RPC failure as ChainUnavailableError ("unknown"); anything that is not an RPC failure is left as it is. */
export function unknownChainAnswer(chain: Chain, err: unknown): unknown {
  if (err instanceof BaseError) return new ChainUnavailableError(chain, err.shortMessage || err.name);
  return err;
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
