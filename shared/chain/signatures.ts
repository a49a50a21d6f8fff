import { isErc6492Signature, verifyMessage, type Address, type Hex } from 'viem';
import type { Config } from '../config.js';
import type { Chain } from '../domain/chains.js';
import { ChainUnavailableError, publicClientFor } from './clients.js';

/**
 * Did `address` sign `message`? EIP-191 recovery first (no network). If that fails and the chain has an RPC, a
 * contract wallet is asked through viem's verifyMessage (EIP-1271; ERC-6492 for a not yet deployed one).
 */
export async function isSignedBy(config: Config, chain: Chain, address: Address, message: string, signature: Hex): Promise<boolean> {
  try {
    if (await verifyMessage({ address, message, signature })) return true;
  } catch {
    // Not a recoverable ECDSA signature; a contract wallet may still accept it.
  }
  // EIP-1271 only where an RPC is configured for the chain (CONTRACT 6): never a public RPC, never in a test run by accident.
  if (!config.chains[chain].rpcUrl) return false;
  const client = publicClientFor(config, chain);
  let code: Hex | undefined;
  try {
    // Asked first because viem reports a failed RPC inside verifyMessage as an invalid signature, not as an outage.
    code = await client.getCode({ address });
  } catch (err) {
    throw new ChainUnavailableError(chain, err instanceof Error ? err.name : 'getCode failed');
  }
  if ((!code || code === '0x') && !isErc6492Signature(signature)) return false;
  try {
    return await client.verifyMessage({ address, message, signature });
  } catch (err) {
    throw new ChainUnavailableError(chain, err instanceof Error ? err.name : 'signature check failed');
  }
}
