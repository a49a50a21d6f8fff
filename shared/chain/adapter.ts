import { keccak256, stringToHex, type Hex } from 'viem';
import type { Unit } from '../db/unit-of-work.js';
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

export interface ChainAdapter {
  /** A managed wallet sends USDC (an off-ramp's funding). Insufficient funds: InsufficientFundsError. */
  sendFromManagedWallet(unit: Unit, scope: EventScope, req: TransferRequest & { walletId: string; hdIndex: number }): Promise<{ hash: Hex; nonce: number }>;
  /** The platform sends USDC to a wallet (an on-ramp's delivery). */
  deliver(unit: Unit, scope: EventScope, req: TransferRequest & { walletId: string }): Promise<{ hash: Hex }>;
  /** Returns a failed off-ramp's funds to the external wallet they came from. */
  refundExternal(unit: Unit, scope: EventScope, req: TransferRequest & { settlementId: string; walletId: string }): Promise<{ hash: Hex }>;
  /** How many confirmations an observed transfer has now. */
  confirmations(subject: ConfirmationSubject): Promise<number>;
}

/** A transaction hash in the on-chain format (0x + 64 lowercase hex), derived from what it stands for. */
export function simulatedHash(environment: Environment, reference: string): Hex {
  return keccak256(stringToHex(`rampway:${environment}:${reference}`));
}
