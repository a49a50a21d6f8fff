import type { EntityManager } from 'typeorm';
import { bytesToHex } from 'viem';
import { hdKeyToAccount, mnemonicToAccount, privateKeyToAddress, type HDAccount, type HDKey, type HDKeyToAccountOptions } from 'viem/accounts';

// Managed addresses live at m/44'/60'/0'/0/<index> of the environment's BIP-39 seed. Only the index is stored;
// private keys exist in memory for the moment a signer needs them and are never stored, logged or returned.
export const MANAGED_WALLET_BASE_PATH = "m/44'/60'/0'/0";

export function managedWalletPath(index: number): string {
  return `${MANAGED_WALLET_BASE_PATH}/${index}`;
}

// PBKDF2 over the mnemonic costs tens of milliseconds: do it once per seed and derive children from the branch node.
const branches = new Map<string, HDKey>();

function branchNode(mnemonic: string): HDKey {
  let node = branches.get(mnemonic);
  if (!node) {
    node = mnemonicToAccount(mnemonic, { path: MANAGED_WALLET_BASE_PATH }).getHdKey();
    branches.set(mnemonic, node);
  }
  return node;
}

function assertIndex(index: number): void {
  if (!Number.isInteger(index) || index < 0 || index >= 2 ** 31) throw new RangeError('HD address index must be a non-hardened BIP-32 index');
}

/** The signing account of a managed wallet (workers that submit transfers use this). */
export function managedWalletAccount(mnemonic: string, index: number): HDAccount {
  assertIndex(index);
  // The path is relative to the branch node, so it is shorter than the BIP-44 shape viem's type expects.
  return hdKeyToAccount(branchNode(mnemonic), { path: `m/${index}` as HDKeyToAccountOptions['path'] });
}

/**
 * The EIP-55 address of a managed wallet. On the request path of every customer (and later every deposit
 * address): one BIP-32 child step from the cached branch node and one public-key computation, about 1.5 ms,
 * where building a whole viem account for it costs about 5 ms.
 */
export function managedWalletAddress(mnemonic: string, index: number): `0x${string}` {
  assertIndex(index);
  return privateKeyToAddress(bytesToHex(branchNode(mnemonic).deriveChild(index).privateKey!));
}

/** Next free BIP-44 address index; allocated by Postgres so concurrent processes never share one. */
export async function allocateHdIndex(em: EntityManager): Promise<number> {
  const rows: { index: number }[] = await em.query(`SELECT nextval('hd_address_index')::integer AS index`);
  return rows[0].index;
}

/** The environment's treasury hot wallet: its own account branch, never a customer's path. */
export const TREASURY_PATH = "m/44'/60'/1'/0/0";
const treasuries = new Map<string, `0x${string}`>();

export function treasuryAddress(mnemonic: string): `0x${string}` {
  let address = treasuries.get(mnemonic);
  if (!address) {
    address = mnemonicToAccount(mnemonic, { path: TREASURY_PATH }).address;
    treasuries.set(mnemonic, address);
  }
  return address;
}

/** The signing account of the treasury hot wallet (derived for the moment of a send, never kept). */
export function treasuryAccount(mnemonic: string): HDAccount {
  return mnemonicToAccount(mnemonic, { path: TREASURY_PATH });
}
