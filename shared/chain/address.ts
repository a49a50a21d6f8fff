import { getAddress, zeroAddress } from 'viem';

export type AddressProblem = 'not_an_address' | 'bad_checksum' | 'zero_address';

/**
 * EIP-55: an all-lower or all-upper hex address carries no checksum and is accepted; a mixed-case one must
 * match its checksum exactly. Returns the checksummed form, or the reason it is refused.
 */
export function checksumAddress(raw: string): { address: `0x${string}` } | { problem: AddressProblem } {
  if (!/^0x[0-9a-fA-F]{40}$/.test(raw)) return { problem: 'not_an_address' };
  const hex = raw.slice(2);
  const checksummed = getAddress(raw.toLowerCase());
  const uniformCase = hex === hex.toLowerCase() || hex === hex.toUpperCase();
  if (!uniformCase && checksummed !== raw) return { problem: 'bad_checksum' };
  if (checksummed === zeroAddress) return { problem: 'zero_address' };
  return { address: checksummed };
}
