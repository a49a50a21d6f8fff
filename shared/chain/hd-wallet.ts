import { createECDH, createHmac } from 'node:crypto';
import type { EntityManager } from 'typeorm';
import { getAddress, keccak256 } from 'viem';
import { hdKeyToAccount, mnemonicToAccount, type HDAccount, type HDKey, type HDKeyToAccountOptions } from 'viem/accounts';

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

const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/**
 * The EIP-55 address of a managed wallet. This is on the request path of every customer (and, later, every
 * deposit address), where viem's pure-JS derivation costs about 5 ms of CPU. It does BIP-32 CKDpriv for one
 * non-hardened level with Node's native HMAC and secp256k1 instead (~0.1 ms); test/unit/hd-wallet.test.ts
 * checks it against viem's derivation.
 */
export function managedWalletAddress(mnemonic: string, index: number): `0x${string}` {
  assertIndex(index);
  const branch = branchNode(mnemonic);
  const data = Buffer.alloc(37);
  Buffer.from(branch.publicKey!).copy(data, 0);
  data.writeUInt32BE(index, 33);
  const digest = createHmac('sha512', branch.chainCode!).update(data).digest();
  const tweak = BigInt(`0x${digest.subarray(0, 32).toString('hex')}`);
  const child = (tweak + BigInt(`0x${Buffer.from(branch.privateKey!).toString('hex')}`)) % SECP256K1_N;
  // BIP-32: such an index is invalid (probability below 2^-127); the sequence hands out the next one instead.
  if (tweak >= SECP256K1_N || child === 0n) throw new RangeError(`HD index ${index} is invalid for this seed`);
  const ecdh = createECDH('secp256k1');
  ecdh.setPrivateKey(Buffer.from(child.toString(16).padStart(64, '0'), 'hex'));
  const publicKey = ecdh.getPublicKey(); // uncompressed: 0x04 || x || y
  return getAddress(`0x${keccak256(publicKey.subarray(1)).slice(-40)}`);
}

/** Next free BIP-44 address index; allocated by Postgres so concurrent processes never share one. */
export async function allocateHdIndex(em: EntityManager): Promise<number> {
  const rows: { index: number }[] = await em.query(`SELECT nextval('hd_address_index')::integer AS index`);
  return rows[0].index;
}
