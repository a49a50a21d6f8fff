import { createHmac } from 'node:crypto';
// libsecp256k1's own code: a child key's one point operation in about 40 µs, where @noble/curves takes 260 µs. Its
// package ships prebuilt native addons for linux-x64 (glibc and musl), darwin-arm64 and win32-x64, and falls back to
// a JavaScript implementation (elliptic) elsewhere, where it is slower but gives the same addresses.
import secp256k1 from 'secp256k1';
import { HDKey } from '@scure/bip32';
import type { EntityManager } from 'typeorm';
import type { Environment } from '../domain/chains.js';
import { AppError } from '../errors.js';
import { bytesToHex } from 'viem';
import { mnemonicToSeedSync } from '@scure/bip39';
import { hdKeyToAccount, publicKeyToAddress, type HDAccount, type HDKeyToAccountOptions } from 'viem/accounts';

/** The public half of an environment's wallet keys: enough to derive every deposit and managed-wallet address. */
export interface PublicWallet {
  /** The account node m/44'/60'/0'/0 as `xpub...` (WALLET_XPUB, WALLET_XPUB_LIVE). */
  xpub: string;
  /** The treasury hot wallet (m/44'/60'/1'/0/0, a hardened branch the xpub cannot reach: WALLET_TREASURY_ADDRESS[_LIVE]). */
  treasuryAddress: `0x${string}`;
}

// Managed addresses live at m/44'/60'/0'/0/<index> of the environment's BIP-39 seed. Only the index is stored;
// private keys exist in memory for the moment a signer needs them and are never stored, logged or returned.
// The indexes are non-hardened, so the account node's extended public key (WALLET_XPUB) derives every address:
// processes that only hand out addresses (the web process) hold that, never the seed.
export const MANAGED_WALLET_BASE_PATH = "m/44'/60'/0'/0";

export function managedWalletPath(index: number): string {
  return `${MANAGED_WALLET_BASE_PATH}/${index}`;
}

// PBKDF2 over the mnemonic costs hundreds of milliseconds on a busy machine, and blocks the event loop: do it once per
// seed, and derive the branch node and the treasury from its root.
const roots = new Map<string, HDKey>();
const branches = new Map<string, HDKey>();

function rootNode(mnemonic: string): HDKey {
  let root = roots.get(mnemonic);
  if (!root) {
    root = HDKey.fromMasterSeed(mnemonicToSeedSync(mnemonic));
    roots.set(mnemonic, root);
  }
  return root;
}

function branchNode(mnemonic: string): HDKey {
  let node = branches.get(mnemonic);
  if (!node) {
    node = rootNode(mnemonic).derive(MANAGED_WALLET_BASE_PATH);
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

/** The account node's extended public key (`xpub...`, WALLET_XPUB): derives every managed address, signs nothing. */
export function accountXpub(mnemonic: string): string {
  return branchNode(mnemonic).publicExtendedKey;
}

/** Why `xpub` cannot be an account node's extended public key, or null when it can. */
export function xpubProblem(xpub: string): string | null {
  let node: HDKey;
  try {
    node = HDKey.fromExtendedKey(xpub);
  } catch (err) {
    return `is not an extended public key (${(err as Error).message})`;
  }
  if (node.privateKey) return 'holds a private key (xprv...): give the xpub, which signs nothing';
  if (node.depth !== 4) return `is the key of a depth-${node.depth} node; the account node m/44'/60'/0'/0 is at depth 4`;
  return null;
}

/** Two extended public keys are the same node's when their key and chain code are (whatever else they encode). */
export function sameXpub(a: string, b: string): boolean {
  const [x, y] = [publicNode(a), publicNode(b)];
  return bytesToHex(x.publicKey!) === bytesToHex(y.publicKey!) && bytesToHex(x.chainCode!) === bytesToHex(y.chainCode!);
}

// Parsing an xpub decompresses its point: do it once per key and derive children from the cached node.
const publicNodes = new Map<string, HDKey>();

function publicNode(xpub: string): HDKey {
  let node = publicNodes.get(xpub);
  if (!node) {
    node = HDKey.fromExtendedKey(xpub);
    publicNodes.set(xpub, node);
  }
  return node;
}

/** What a public child step needs of the account node: its compressed key and its chain code. */
interface ParentKey {
  compressed: Buffer;
  chainCode: Buffer;
}
const parentKeys = new Map<string, ParentKey>();

function parentKey(xpub: string): ParentKey {
  let parent = parentKeys.get(xpub);
  if (!parent) {
    const node = publicNode(xpub);
    parent = { compressed: Buffer.from(node.publicKey!), chainCode: Buffer.from(node.chainCode!) };
    parentKeys.set(xpub, parent);
  }
  return parent;
}

/**
 * The EIP-55 address of a managed wallet, from the account xpub: one public BIP-32 child step (CKDpub) from the cached
 * node: the account's point plus I_L times the generator, kept uncompressed for its address. About 90 µs: the point
 * 41, the address's two Keccak hashes 21, the HMAC 4, the rest its byte and hex conversions (0.36 ms with
 * @noble/curves' multiplication, 0.7 ms through HDKey.deriveChild). No private key is anywhere near.
 */
export function managedWalletAddress(xpub: string, index: number): `0x${string}` {
  assertIndex(index);
  const parent = parentKey(xpub);
  const data = Buffer.alloc(37);
  parent.compressed.copy(data, 0);
  data.writeUInt32BE(index, 33);
  const I = createHmac('sha512', parent.chainCode).update(data).digest();
  // parse256(I_L) at or past the curve's order, or a child at infinity, is no key (BIP-32; about 1 in 2^127): the
  // tweak refuses both (throws).
  const child = secp256k1.publicKeyTweakAdd(parent.compressed, I.subarray(0, 32), false);
  return publicKeyToAddress(bytesToHex(child));
}

/** The environment's public wallet keys, for handing out `what`; live without them configured answers 503. */
export function walletOf(config: { wallets: { sandbox: PublicWallet; live: PublicWallet | null } }, environment: Environment, what: string): PublicWallet {
  const wallet = config.wallets[environment];
  if (!wallet) throw AppError.unavailable(`${what} are not configured on this deployment (WALLET_XPUB_LIVE).`, 60);
  return wallet;
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
    address = treasuryAccount(mnemonic).address;
    treasuries.set(mnemonic, address);
  }
  return address;
}

/** The signing account of the treasury hot wallet (derived for the moment of a send, never kept). */
export function treasuryAccount(mnemonic: string): HDAccount {
  return hdKeyToAccount(rootNode(mnemonic), { path: TREASURY_PATH });
}
