// Signing behind one small interface (CONTRACT 15, issue 24): the sender asks a TransactionSigner for the account
// that signs as the treasury hot wallet or as managed wallet `index`, and only ever uses its address and
// signTransaction. The default signs in process from the seeds the settlement pool holds (WALLET_SEED,
// WALLET_SEED_LIVE); a KMS or HSM signer replaces it by implementing `account` (viem's toAccount builds a
// SigningAccount from a remote signTransaction), passed as SenderDeps.signer.
import type { Address, Hex, TransactionSerializable } from 'viem';
import type { Config } from '../config.js';
import type { Environment } from '../domain/chains.js';
import { managedWalletAccount, treasuryAccount } from './hd-wallet.js';

/** Who signs: the treasury hot wallet, or the managed wallet at an HD index. */
export type Signer = { kind: 'managed'; index: number } | { kind: 'treasury' };

/** What the sender needs of a signing key: its address, and a signed, serialized transaction. */
export interface SigningAccount {
  address: Address;
  signTransaction(transaction: TransactionSerializable): Promise<Hex>;
}

export interface TransactionSigner {
  account(environment: Environment, who: Signer): SigningAccount;
}

/** The default: keys derived in this process from the seeds it holds (only the settlement pool and admin commands hold them). */
export function inProcessSigner(config: Pick<Config, 'walletSeeds'>): TransactionSigner {
  return {
    account(environment, who) {
      const seed = config.walletSeeds?.[environment];
      // Only the settlement pool signs: another process reaching here is a wiring bug, not a missing setting.
      if (!seed) throw new Error(config.walletSeeds ? `no wallet seed for ${environment}` : 'this process holds no wallet seeds: only the settlement pool signs');
      return who.kind === 'treasury' ? treasuryAccount(seed) : managedWalletAccount(seed, who.index);
    },
  };
}
