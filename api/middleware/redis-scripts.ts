import type { Redis } from 'ioredis';

// Each script is one atomic round trip. Installed with defineCommand, so ioredis sends EVALSHA.

/**
 * Rate limit (fixed window, starting at the key's first request) and, for writes, the idempotency claim.
 * KEYS[1] counter, KEYS[2] idempotency key (optional).
 * ARGV: limit, window ms, in-flight record, in-flight ttl ms, requests to count: 1; more for a read's lease (never
 * past the limit, at least 1 so a refusal is still counted; rate-leases.ts); 0 when the process already holds a
 * leased one for this request (counted when leased: the window's count is read, not raised); ARGV[6] '1' when that
 * count is a write's cost (a payout batch's items): all of it or nothing, so a cost the window has not left is
 * refused and counted as one request, and a replay (its idempotency record exists) costs one.
 * Returns { count, pttl, verdict, existing record, requests counted }.
 */
const GATE = `
local limit = tonumber(ARGV[1])
local want = tonumber(ARGV[5])
local exact = ARGV[6] == '1'
if exact and #KEYS > 1 and redis.call('EXISTS', KEYS[2]) == 1 then want = 1 end
local over = exact and want > 1 and tonumber(redis.call('GET', KEYS[1]) or '0') + want > limit
if over then want = 1 end
local n
local held = want == 0 and redis.call('EXISTS', KEYS[1]) == 1
if held then
  n = tonumber(redis.call('GET', KEYS[1]))
else
  if want < 1 then want = 1 end
  if want > 1 and not exact then want = math.max(1, math.min(want, limit - tonumber(redis.call('GET', KEYS[1]) or '0'))) end
  n = redis.call('INCRBY', KEYS[1], want)
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
if over then return {n, ttl, 'limited', false, want} end
if held then want = 0 elseif n > limit then return {n, ttl, 'limited', false, want} end
if #KEYS < 2 then return {n, ttl, 'ok', false, want} end
local cur = redis.call('GET', KEYS[2])
if cur then return {n, ttl, 'existing', cur, want} end
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
return {n, ttl, 'claimed', false, want}`;

/**
 * KEYS[1] idempotency key. ARGV: token, 'store'|'release', record, ttl seconds. Only the claimant may settle it.
 * Returns 1 settled, 2 stored although the claim had vanished (Redis lost it), -1 another request holds the key.
 */
const FINISH = `
local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, rec = pcall(cjson.decode, cur)
  if not ok or rec.t ~= ARGV[1] then return -1 end
end
if ARGV[2] == 'release' then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('SET', KEYS[1], ARGV[3], 'EX', tonumber(ARGV[4]))
if cur then return 1 end
return 2`;

/** KEYS[1] idempotency key. ARGV: token, lock ms. Extends the claimant's in-flight lock; 0 if it is no longer ours. */
const RENEW = `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local ok, rec = pcall(cjson.decode, cur)
if not ok or rec.t ~= ARGV[1] or rec.s ~= 'f' then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;

/** Failed authentication per client IP. KEYS[1] counter; ARGV window seconds. Returns { count, ttl seconds }. */
const AUTH_FAIL = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('TTL', KEYS[1])}`;

/** The same counter, read without counting. KEYS[1] counter. Returns { count, ttl seconds } (0 and -2 when absent). */
const AUTH_FAIL_COUNT = `
return {tonumber(redis.call('GET', KEYS[1]) or '0'), redis.call('TTL', KEYS[1])}`;

/**
 * A slot among an API key's concurrent exports. KEYS[1] sorted set (member: slot token, score: lease end, ms).
 * ARGV: token, max slots, lease ms. Slots whose lease ended (a process that died mid-export) are dropped first.
 * Returns 1 taken (or renewed, when the token holds one), 0 when all are in use.
 */
const EXPORT_SLOT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`;

export type GateResult = [count: number, pttl: number, verdict: 'limited' | 'ok' | 'existing' | 'claimed', existing: string | null, counted: number];

export interface Scripts {
  gate(keys: string[], limit: number, windowMs: number, record: string, lockMs: number, take: number, exact?: boolean): Promise<GateResult>;
  finish(key: string, token: string, mode: 'store' | 'release', record: string, ttlSeconds: number): Promise<number>;
  authFail(key: string, windowSeconds: number): Promise<[number, number]>;
  authFailCount(key: string): Promise<[number, number]>;
  renew(key: string, token: string, lockMs: number): Promise<number>;
  exportSlot(key: string, token: string, max: number, leaseMs: number): Promise<number>;
}

export function installScripts(redis: Redis): Scripts {
  redis.defineCommand('rwGate', { lua: GATE });
  redis.defineCommand('rwFinish', { lua: FINISH, numberOfKeys: 1 });
  redis.defineCommand('rwAuthFail', { lua: AUTH_FAIL, numberOfKeys: 1 });
  redis.defineCommand('rwAuthFailCount', { lua: AUTH_FAIL_COUNT, numberOfKeys: 1 });
  redis.defineCommand('rwRenew', { lua: RENEW, numberOfKeys: 1 });
  redis.defineCommand('rwExportSlot', { lua: EXPORT_SLOT, numberOfKeys: 1 });
  const r = redis as unknown as Record<string, (...args: unknown[]) => Promise<any>>;
  return {
    gate: (keys, limit, windowMs, record, lockMs, take, exact = false) => r.rwGate(keys.length, ...keys, limit, windowMs, record, lockMs, take, exact ? '1' : '0'),
    finish: (key, token, mode, record, ttl) => r.rwFinish(key, token, mode, record, ttl),
    authFail: (key, windowSeconds) => r.rwAuthFail(key, windowSeconds),
    authFailCount: (key) => r.rwAuthFailCount(key),
    renew: (key, token, lockMs) => r.rwRenew(key, token, lockMs),
    exportSlot: (key, token, max, leaseMs) => r.rwExportSlot(key, token, max, leaseMs),
  };
}
