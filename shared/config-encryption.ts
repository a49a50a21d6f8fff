// ENCRYPTION_KEYS: the keys that seal personal data at rest, as configuration reads them (shared by config.ts and the
// per-process checks of config-processes.ts, which must not import config.ts).
import { ConfigError } from './config-error.js';

// Development-only defaults: live data never uses them (see encryptionKeysConfigured; the wallet ones are in config-wallets.ts).
export const DEV_ENCRYPTION_KEY = Buffer.alloc(32, 7);
export const DEV_ENCRYPTION_KEYS = `dev1:${DEV_ENCRYPTION_KEY.toString('base64')}`;

/** `keyid:<base64 32 bytes>[,keyid:...]`: the first encrypts, all decrypt. */
export function parseEncryptionKeys(raw: string): { id: string; key: Buffer }[] {
  const keys = raw.split(',').map((part) => part.trim()).filter(Boolean).map((part) => {
    const sep = part.indexOf(':');
    if (sep < 1) throw new ConfigError('ENCRYPTION_KEYS entries are "<key-id>:<base64 32-byte key>"');
    const id = part.slice(0, sep);
    const key = Buffer.from(part.slice(sep + 1), 'base64');
    if (!/^[A-Za-z0-9_-]{1,32}$/.test(id)) throw new ConfigError('ENCRYPTION_KEYS key ids are 1-32 characters of [A-Za-z0-9_-]');
    if (key.length !== 32) throw new ConfigError(`ENCRYPTION_KEYS key "${id}" must decode to 32 bytes`);
    return { id, key };
  });
  if (keys.length === 0) throw new ConfigError('ENCRYPTION_KEYS must hold at least one key');
  if (new Set(keys.map((k) => k.id)).size !== keys.length) throw new ConfigError('ENCRYPTION_KEYS has a duplicate key id');
  return keys;
}

