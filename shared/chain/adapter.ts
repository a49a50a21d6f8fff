import { keccak256, stringToHex, type Hex } from 'viem';
import type { Unit, UnitDeps } from '../db/unit-of-work.js';
import type { Config } from '../config.js';
import type { Chain, Environment } from '../domain/chains.js';
import type { EventScope } from '../domain/events.js';

// The chain behind the engine. The sandbox adapter plays it with ledger entries and simulated hashes; the live
// adapter (RPC, signing, confirmations from the chain head) implements the same calls, so jobs and transitions
// never ask which environment they run in.

export interface TransferRequest {
  /** Our id for this transfer: a retry with the same reference is the same transfer. */
  reference: string;
  chain: Chain;
  /** USDC minor units. */
  amount: bigint;
  to: string;
}

export interface ConfirmationSubject {
  chain: Chain;
  block_number: string | number | null;
  detected_at: Date | null;
  required_confirmations: number;
}

/** A managed wallet's transfer as it landed: where the watcher will find it (the sandbox's is simulated, log 0, no block). */
export interface SentTransfer {
  hash: Hex;
  nonce: number;
  logIndex: number;
  blockNumber: bigint | null;
  blockHash: Hex | null;
}

export interface ChainDeps extends UnitDeps {
  config: Config;
}

export interface ChainAdapter {
  /** Whether transfers happen on a real chain (mined, confirmed from the head, subject to reorgs) or in the ledger. */
  readonly live: boolean;
  /**
   * A managed wallet sends USDC to a deposit address (an off-ramp's funding), outside any unit of work: it answers
   * once the transfer is final in the adapter's sense (the sandbox: posted; live: mined). Too little USDC:
   * ChainFundsError; too little gas and no top-up: InsufficientGasError.
   */
  sendFromManagedWallet(deps: ChainDeps, scope: EventScope, req: TransferRequest & { walletId: string; hdIndex: number }): Promise<SentTransfer>;
  /**
   * The same send made in the caller's unit of work, where the adapter's transfer is only a ledger entry (the sandbox):
   * the off-ramp's move to signing, the send and its observation then commit together, or not at all. Absent where
   * the send goes to a real chain (it must happen, and be waited for, outside any transaction).
   */
  sendInUnit?(unit: Unit, scope: EventScope, req: TransferRequest & { walletId: string; hdIndex: number }): Promise<SentTransfer>;
  /** The platform sends USDC to a wallet (an on-ramp's delivery): the hash now, or null when a send job was staged. */
  deliver(unit: Unit, scope: EventScope, req: TransferRequest & { walletId: string; transactionId: string }): Promise<{ hash: Hex } | null>;
  /**
   * Returns an off-ramp's funds to `to` (`walletId`: the funding wallet, when that is where they go): the hash now, or
   * null when a send job was staged. `total`: everything returned so far, this included (the send's reference).
   */
  refund(unit: Unit, scope: EventScope, req: TransferRequest & { settlementId: string; walletId: string | null; transactionId: string; total: bigint }): Promise<{ hash: Hex } | null>;
  /** Sends a treasury withdrawal to the business's wallet: the hash now (the sandbox), or null when a send job was staged. */
  withdraw(unit: Unit, scope: EventScope, req: TransferRequest & { withdrawalId: string }): Promise<{ hash: Hex } | null>;
  /** How many confirmations an observed transfer has now. */
  confirmations(subject: ConfirmationSubject): Promise<number>;
  /**
   * When the adapter knows it (the sandbox, whose confirmations rise with time): how long until the subject has all its
   * confirmations, so one check then replaces a check per step. Absent on a real chain: only asking again tells.
   */
  readyInMs?(subject: ConfirmationSubject): number;
  /**
   * Whether the block that held a transfer is still on the canonical chain (false: another block is at its height).
   * Live reads that fail, or a height the node does not serve yet, throw ChainUnavailableError: unknown, ask again.
   */
  canonical(chain: Chain, blockNumber: bigint, blockHash: string): Promise<boolean>;
  /** The chain's head now (live: where the watcher must start to see an address issued now), null for the sandbox's chain. */
  head(chain: Chain): Promise<bigint | null>;
}

/** A transaction hash in the on-chain format (0x + 64 lowercase hex), derived from what it stands for. */
export function simulatedHash(environment: Environment, reference: string): Hex {
  return keccak256(stringToHex(`rampway:${environment}:${reference}`));
}
