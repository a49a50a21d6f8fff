import type { Response } from 'express';
import type { Logger } from 'pino';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { stringify } from 'csv-stringify';
import type { AppDeps } from './context.js';
import { AppError } from '../shared/errors.js';

/** What a spreadsheet reads as the start of a formula (ASCII and full-width), or as a cell to run (tab, CR). */
const FORMULA_START = /^[=+\-@\t\r\uFF1D\uFF0B\uFF0D\uFF20]/;

/** OWASP's CSV injection advice: a quote before a formula-like text makes it text again. */
export function formulaSafe(text: string): string {
  return FORMULA_START.test(text) ? `'${text}` : text;
}

/** An export slot is leased in Redis and renewed while the export runs: a process that dies frees its slots this late. */
const SLOT_LEASE_MS = 60_000;
/** How long a refused export is told to wait: exports end within seconds, or within a stall once their reader stops. */
const SLOT_RETRY_AFTER_SECONDS = 5;

/**
 * One of the key's EXPORTS_PER_KEY slots (CONTRACT 18), held until `release`; a rate_limited error when all are in
 * use. Without Redis, exports go on unlimited, as reads do.
 */
async function takeSlot(deps: AppDeps, keyId: string, log: Logger): Promise<() => void> {
  const key = `${deps.config.redisPrefix}:exports:${keyId}`;
  const token = randomUUID();
  const max = deps.config.exportsPerKey;
  const take = () => deps.scripts.exportSlot(key, token, max, SLOT_LEASE_MS);
  let taken: number;
  try {
    taken = await take();
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'redis unreachable: this export runs without the per-key limit');
    return () => undefined;
  }
  if (!taken) throw new AppError('rate_limited', `At most ${max} exports run at once per API key; retry when one has finished.`, undefined, SLOT_RETRY_AFTER_SECONDS);
  const renew = setInterval(() => void take().catch(() => undefined), SLOT_LEASE_MS / 3);
  return () => {
    clearInterval(renew);
    deps.redis.zrem(key, token).catch(() => undefined);
  };
}

/**
 * Ends the response when its reader has taken nothing for `stallMs`: the answer waits on the reader (backpressure)
 * and no byte has drained since. A slow database is not a stalled reader: the answer is then not waiting.
 */
function watchStall(res: Response, stallMs: number): () => void {
  let progress = Date.now();
  const drained = () => (progress = Date.now());
  res.on('drain', drained);
  const timer = setInterval(() => {
    if (!res.writableNeedDrain) progress = Date.now();
    else if (Date.now() - progress >= stallMs) res.destroy(new Error(`the reader took nothing for ${Math.round(stallMs / 1000)} s`));
  }, Math.min(1000, Math.max(50, stallMs / 4)));
  return () => {
    clearInterval(timer);
    res.off('drain', drained);
  };
}

/**
 * An export (Accept: text/csv): RFC 4180 rows streamed as they are read, a header first; nulls are empty fields.
 * Only the `text` columns are made formula-safe: a signed amount ("-5.00") must stay a number. At most
 * EXPORTS_PER_KEY run at once per API key, and one whose reader stalls for EXPORT_STALL_MS is ended (its rows'
 * reader closed, its slot freed).
 */
export async function sendCsv(
  deps: AppDeps, keyId: string, log: Logger, res: Response,
  csv: { columns: readonly string[]; text: readonly string[] }, rows: () => AsyncIterable<Record<string, unknown>>,
): Promise<void> {
  const release = await takeSlot(deps, keyId, log);
  const unwatch = watchStall(res, deps.config.exportStallMs);
  try {
    const text = new Set(csv.text);
    res.status(200).type('text/csv; charset=utf-8');
    res.setHeader('Cache-Control', 'no-store');
    const stringifier = stringify({
      header: true,
      columns: [...csv.columns],
      record_delimiter: 'windows',
      cast: { date: (d) => d.toISOString(), string: (value, context) => (text.has(String(context.column)) ? formulaSafe(value) : value) },
    });
    await pipeline(Readable.from(rows()), stringifier, res);
  } finally {
    unwatch();
    release();
  }
}
