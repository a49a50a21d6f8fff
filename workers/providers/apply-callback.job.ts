import { DelayedError } from 'bullmq';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { AppError } from '../../shared/errors.js';
import { collectionRequestFor, requestMismatch } from '../../shared/domain/collection-results.js';
import { applyProviderResult, needsCorroboration, ResultTooEarlyError, type Corroboration } from '../../shared/domain/provider-results.js';
import { parseDarajaCallback, type DarajaCallbackKind } from '../../shared/providers/daraja/callbacks.js';
import { splitPayerKeys } from '../../shared/providers/daraja/msisdn.js';
import { isFinalOutcome, type ProviderCallback } from '../../shared/providers/provider.js';
import { liveProvider } from '../../shared/providers/providers.js';
import type { LiveProviderId } from '../../shared/providers/live-rails.js';
import { corroborateMomo } from '../../shared/providers/momo/momo-corroboration.js';
import { defineJob, type WorkerDeps } from '../job-definition.js';

/**
 * A collection's final result a callback claims is corroborated by STK Query on the callback's own CheckoutRequestID
 * (CONTRACT §14): a success must also match its request's amount and phone; a decline must not be a prompt M-Pesa
 * says was paid (a forged decline would leave the payer charged and nothing delivered). Asked as soon as the callback
 * is stored: this job is its first step. No final answer yet: the job tries again.
 */
async function corroborate(deps: WorkerDeps, result: ProviderCallback): Promise<Corroboration> {
  const request = await collectionRequestFor(deps.ds, result);
  if (!request) throw new ResultTooEarlyError();
  const paid = result.outcome.status === 'succeeded';
  const wrong = paid ? requestMismatch(request, result) : null;
  if (wrong) return { request, contradicted: `its ${wrong} is not the request's` };
  const asked = await liveProvider('mpesa_daraja', { db: deps.ds, config: deps.config, log: deps.log }).queryStatus('collection', request.reference, result.outcome.provider_reference!);
  if (asked && isFinalOutcome(asked)) return (asked.status === 'succeeded') === paid ? { request, confirmed: true } : { request, contradicted: `STK Query says ${asked.status}` };
  throw new NotFinalYet();
}

/** STK Query still says "being processed": M-Pesa's record lags the callback it sent. */
class NotFinalYet extends AppError {
  constructor() {
    super('service_unavailable', 'M-Pesa has no final answer for the prompt yet; asking again shortly.');
  }
}

/** For this long after its callback, a claim STK Query cannot answer yet is asked about again soon (a prompt lives about a minute). */
const CORROBORATE_FOR_MS = 120_000;

/** Soon after the callback, soon again (a quarter of the time since, 250 ms to 2 s): never the status checks' window. */
export function corroborateAgainInMs(sinceCallbackMs: number): number {
  return Math.min(2000, Math.max(250, Math.round(sinceCallbackMs / 4)));
}

interface StoredCallback {
  provider: LiveProviderId;
  kind: string;
  body: unknown;
  payer_key: string | null;
  received_at: Date;
  processed_at: Date | null;
}

/** Daraja: parsed, and a collection's claim corroborated by STK Query; what it names is then applied. */
async function darajaResult(deps: WorkerDeps, stored: StoredCallback) {
  // Not a shape we read: kept as received for operators (result `unparsed`), never retried.
  const parsed = parseDarajaCallback(stored.kind as DarajaCallbackKind, stored.body);
  // The stored body's phone is redacted: who paid is the digest taken on receipt.
  if (parsed) parsed.payers = splitPayerKeys(stored.payer_key);
  const check = parsed && needsCorroboration(parsed) ? await corroborate(deps, parsed) : undefined;
  return parsed ? { result: parsed, check } : null;
}

/**
 * A callback the web process stored (raw, once per body) is applied here: parsed, corroborated when it claims money
 * came in (MoMo: every final claim, by the status GET), matched to its transaction or payment intent, and moved by a
 * conditional transition in the same unit that marks the callback processed.
 */
export const applyCallbackJob = defineJob({
  name: 'provider.callback',
  async process(job, deps) {
    const stored: StoredCallback[] = await deps.ds.query(`SELECT provider, kind, body, payer_key, received_at, processed_at FROM provider_callbacks WHERE id = $1`, [job.data.callbackId]);
    if (!stored[0] || stored[0].processed_at) return 'already applied';
    let read: Awaited<ReturnType<typeof darajaResult | typeof corroborateMomo>>;
    try {
      read = stored[0].provider === 'mtn_momo' ? await corroborateMomo(deps, stored[0].kind, stored[0].body) : await darajaResult(deps, stored[0]);
    } catch (err) {
      // Its corroboration waits on M-Pesa alone: asked again within a second or two, not as an attempt (CONTRACT §14).
      const since = Date.now() - stored[0].received_at.getTime();
      if (!(err instanceof NotFinalYet) || !deps.token || since > CORROBORATE_FOR_MS) throw err;
      await job.moveToDelayed(Date.now() + corroborateAgainInMs(since), deps.token);
      throw new DelayedError();
    }
    return inUnit(deps, async (unit) => {
      const rows: { processed_at: Date | null }[] = await unit.em.query(`SELECT processed_at FROM provider_callbacks WHERE id = $1 FOR UPDATE`, [job.data.callbackId]);
      if (!rows[0] || rows[0].processed_at) return 'already applied';
      const result = typeof read === 'string' ? read : read ? await applyProviderResult(unit, deps.config, read.result, read.check) : 'unparsed';
      await unit.em.query(`UPDATE provider_callbacks SET processed_at = now(), result = $2 WHERE id = $1`, [job.data.callbackId, result]);
      return result;
    });
  },
  // Still matching nothing of ours (forged with a valid token, or for another system), or never answered by STK Query,
  // after every retry: kept, marked. The provider checks still ask about whatever waits for a result.
  async onFinalFailure(job, _err, deps) {
    await deps.ds.query(`UPDATE provider_callbacks SET processed_at = now(), result = 'unmatched' WHERE id = $1 AND processed_at IS NULL`, [job.data.callbackId]);
  },
});
