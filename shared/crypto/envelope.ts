// Envelope encryption: each record gets its own random data key (AES-256-GCM); the data key is stored wrapped
// (AES-256-GCM) by a master key from ENCRYPTION_KEYS, whose id is stored beside it. Rotating the master key
// re-seals records; any key still listed in ENCRYPTION_KEYS keeps opening the records sealed under it.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export interface MasterKey {
  id: string;
  key: Buffer;
}

export interface Sealed {
  keyId: string;
  /** iv (12) || tag (16) || encrypted data key (32) */
  wrappedKey: Buffer;
  iv: Buffer;
  tag: Buffer;
  ciphertext: Buffer;
}

const ALGORITHM = 'aes-256-gcm';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

/**
 * A sealed record cannot be opened: its key id is not in ENCRYPTION_KEYS, or the key listed under that id does not
 * open it (other bytes reused under the id, or a corrupt row). A configuration or storage fault, never the caller's.
 */
export class SealedRecordUnreadable extends Error {
  constructor(readonly keyId: string, readonly reason: 'key_not_listed' | 'authentication_failed') {
    super(reason === 'key_not_listed' ? `encryption key "${keyId}" is not in ENCRYPTION_KEYS` : `a record sealed under key "${keyId}" does not open with that key`);
    this.name = 'SealedRecordUnreadable';
  }
}

function encrypt(key: Buffer, plaintext: Buffer, aad: string): { iv: Buffer; tag: Buffer; ciphertext: Buffer } {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv(ALGORITHM, key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return { iv, tag: cipher.getAuthTag(), ciphertext };
}

function decrypt(key: Buffer, iv: Buffer, tag: Buffer, ciphertext: Buffer, aad: string): Buffer {
  const decipher = createDecipheriv(ALGORITHM, key, iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(ciphertext), decipher.final()]);
}

// The wrap is bound to its key id, so a wrapped key cannot be relabelled as another key's.
const wrapAad = (keyId: string) => `rampway:data-key:${keyId}`;

/**
 * Encrypts under a fresh data key wrapped by the current (first) master key. `aad` binds the ciphertext to
 * its owner (e.g. the row's id, business and environment), so it cannot be moved to another row.
 */
export function seal(plaintext: Buffer, keys: readonly MasterKey[], aad: string): Sealed {
  const master = keys[0];
  if (!master) throw new Error('no encryption key configured');
  const dataKey = randomBytes(KEY_BYTES);
  try {
    const body = encrypt(dataKey, plaintext, aad);
    const wrap = encrypt(master.key, dataKey, wrapAad(master.id));
    return { keyId: master.id, wrappedKey: Buffer.concat([wrap.iv, wrap.tag, wrap.ciphertext]), ...body };
  } finally {
    dataKey.fill(0);
  }
}

/** Decrypts with whichever listed master key the record names. Throws on tampering or a wrong `aad`. */
export function open(sealed: Sealed, keys: readonly MasterKey[], aad: string): Buffer {
  const master = keys.find((k) => k.id === sealed.keyId);
  if (!master) throw new SealedRecordUnreadable(sealed.keyId, 'key_not_listed');
  const w = sealed.wrappedKey;
  let dataKey: Buffer | undefined;
  try {
    dataKey = decrypt(master.key, w.subarray(0, IV_BYTES), w.subarray(IV_BYTES, IV_BYTES + TAG_BYTES), w.subarray(IV_BYTES + TAG_BYTES), wrapAad(master.id));
    return decrypt(dataKey, sealed.iv, sealed.tag, sealed.ciphertext, aad);
  } catch {
    // GCM refused the tag (or the lengths are off): wrong key bytes, another row's ciphertext, or corruption.
    throw new SealedRecordUnreadable(sealed.keyId, 'authentication_failed');
  } finally {
    dataKey?.fill(0);
  }
}

export function sealJson(value: unknown, keys: readonly MasterKey[], aad: string): Sealed {
  return seal(Buffer.from(JSON.stringify(value), 'utf8'), keys, aad);
}

export function openJson<T>(sealed: Sealed, keys: readonly MasterKey[], aad: string): T {
  return JSON.parse(open(sealed, keys, aad).toString('utf8')) as T;
}

/** Re-encrypts under the current key with a fresh data key; the plaintext never leaves this function. */
export function reseal(sealed: Sealed, keys: readonly MasterKey[], aad: string): Sealed {
  const plaintext = open(sealed, keys, aad);
  try {
    return seal(plaintext, keys, aad);
  } finally {
    plaintext.fill(0);
  }
}
