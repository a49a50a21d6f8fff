import { randomUUID } from 'node:crypto';
import { getConfig } from '../../shared/config.js';
import { createBusiness, createKey, type CreatedKey } from '../../shared/admin/commands.js';
import type { Scope } from '../../shared/domain/api-keys.js';
import { getDs } from './shared.js';

export interface TestBusiness {
  businessId: string;
  sandboxKey: string;
  liveKey: string;
  keys: CreatedKey[];
}

/** A fresh business with a sandbox and a live key holding every scope. Tests isolate by business, not by truncating. */
export async function makeBusiness(name = `Test ${randomUUID().slice(0, 8)}`): Promise<TestBusiness> {
  const created = await createBusiness({ ds: await getDs(), config: getConfig() }, { name });
  return {
    businessId: created.business_id,
    sandboxKey: created.keys.find((k) => k.environment === 'sandbox')!.key,
    liveKey: created.keys.find((k) => k.environment === 'live')!.key,
    keys: created.keys,
  };
}

export async function makeKey(
  businessId: string,
  opts: { environment?: 'sandbox' | 'live'; scopes?: Scope[]; allowedIps?: string[]; rateLimit?: number; rateWindowSeconds?: number } = {},
): Promise<CreatedKey> {
  return createKey({ ds: await getDs(), config: getConfig() }, { businessId, environment: opts.environment ?? 'sandbox', ...opts });
}

export function bearer(key: string): { Authorization: string } {
  return { Authorization: `Bearer ${key}` };
}

/** Headers for a write: the key and a fresh Idempotency-Key. */
export function writeHeaders(key: string, idempotencyKey: string = randomUUID()): Record<string, string> {
  return { Authorization: `Bearer ${key}`, 'Idempotency-Key': idempotencyKey };
}
