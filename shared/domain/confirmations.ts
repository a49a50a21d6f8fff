import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import type { ChainAdapter } from '../chain/adapter.js';
import { ChainUnavailableError } from '../chain/clients.js';
import { chainFor } from '../chain/sandbox-chain.js';
import type { Chain } from './chains.js';
import type { EventScope } from './events.js';

// How final a payment is, one rule for every kind (an off-ramp's settlement, a payment intent's deposit): every
// transfer counted toward it must still be in its block on the canonical chain, and the payment is as deep as its
// newest transfer. A payer who sends a little, waits, then the rest is confirmed when the rest is, never from the first.

/** A transfer counted toward a payment, where it landed (the sandbox's transfers have no block). */
export interface LandedTransfer {
  block_number: string | null;
  block_hash: string | null;
}

export type PaymentDepth<T> =
  /** Some counted transfers' blocks left the canonical chain: the caller undoes them. */
  | { state: 'reorged'; removed: T[] }
  /** The chain could not be read: nothing decided, counted again later. */
  | { state: 'unknown'; reason: string }
  /** `nextCheckMs`: when to count again if not deep (the adapter's readyInMs, or at once: the caller's own pace). */
  | { state: 'counted'; confirmations: number; deep: boolean; nextCheckMs: number };

/**
 * The depth of a payment made of `transfers` (live: each block checked, confirmations from the highest block; the
 * sandbox: from `lastSeenAt`, when its newest transfer was seen), capped at `required`.
 */
export async function paymentDepth<T extends LandedTransfer>(
  adapter: ChainAdapter, chain: Chain, transfers: T[], required: number, lastSeenAt: Date | null,
): Promise<PaymentDepth<T>> {
  try {
    const removed: T[] = [];
    if (adapter.live) {
      for (const t of transfers) if (t.block_number !== null && t.block_hash !== null && !(await adapter.canonical(chain, BigInt(t.block_number), t.block_hash))) removed.push(t);
    }
    if (removed.length) return { state: 'reorged', removed };
    const newest = transfers.reduce<bigint | null>((max, t) => (t.block_number !== null && (max === null || BigInt(t.block_number) > max) ? BigInt(t.block_number) : max), null);
    const subject = { chain, block_number: newest === null ? null : newest.toString(), detected_at: lastSeenAt, required_confirmations: required };
    const confirmations = Math.min(await adapter.confirmations(subject), required);
    return { state: 'counted', confirmations, deep: confirmations >= required, nextCheckMs: adapter.readyInMs?.(subject) ?? 0 };
  } catch (err) {
    if (err instanceof ChainUnavailableError) return { state: 'unknown', reason: err.message };
    throw err;
  }
}

/**
 * The chain head as a deposit address is issued (live; null on the sandbox's chain): stored with the address so the
 * watcher's first scan of the chain starts early enough to see its transfers. An address whose issue block cannot be
 * read is not handed out (503): a transfer to it could be missed.
 */
export async function issuedBlock(config: Config, scope: EventScope, chain: Chain): Promise<bigint | null> {
  try {
    return await chainFor(scope.environment, config).head(chain);
  } catch (err) {
    if (err instanceof ChainUnavailableError) throw AppError.unavailable(`The ${chain} network cannot be read to issue a deposit address; retry shortly.`);
    throw err;
  }
}
