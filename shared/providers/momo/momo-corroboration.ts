// A MoMo callback never moves anything by itself (CONTRACT §14, §17): MTN's status GET for the request's current
// X-Reference-Id is asked at once, and only its answer is applied, when it agrees with the callback. A callback the
// GET contradicts (another verdict, or no such request at MTN) changes nothing, and is logged and counted.
import type { Config } from '../../config.js';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { AppError } from '../../errors.js';
import { contradicted, ResultTooEarlyError } from '../../domain/provider-results.js';
import { type ProviderCallback, type ProviderKind } from '../provider.js';
import { liveProvider } from '../providers.js';
import { parseMomoCallback } from './momo-results.js';

const verdict = (status: string) => (status === 'succeeded' || status === 'SUCCESSFUL' ? 'SUCCESSFUL' : 'FAILED');

/** The result to apply (the GET's answer), a result code when there is nothing to apply, or null for a body we cannot read. */
export async function corroborateMomo(
  deps: { ds: DataSource; config: Config; log: Logger }, kind: string, body: unknown,
): Promise<{ result: ProviderCallback; check?: undefined } | string | null> {
  if (kind !== 'collection' && kind !== 'payout') return null;
  const claim = parseMomoCallback(kind as ProviderKind, body);
  if (!claim) return null;
  if (claim.said.status === 'PENDING') return 'pending';
  const known: unknown[] = await deps.ds.query(`SELECT 1 FROM provider_requests WHERE environment = 'live' AND kind = $1 AND reference = $2`, [kind, claim.reference]);
  // Not (yet) ours: the request's own unit may not have committed; after every retry it is kept as unmatched.
  if (!known.length) throw new ResultTooEarlyError();
  const asked = await liveProvider('mtn_momo', { db: deps.ds, config: deps.config, log: deps.log }).queryStatus(claim.kind, claim.reference!);
  if (!asked) return contradicted(claim.kind, claim.reference, 'MTN has no record of the request', 'mtn_momo');
  if (asked.status === 'pending') throw new AppError('service_unavailable', 'MTN MoMo has no final answer for the request yet; asking again shortly.');
  if (verdict(asked.status) !== claim.said.status) return contradicted(claim.kind, claim.reference, `the status GET says ${verdict(asked.status)}`, 'mtn_momo');
  // The status GET's answer is about the request's current X-Reference-Id: a status answer, not the callback's claim.
  return { result: { kind: claim.kind, reference: claim.reference, outcome: asked, receipt: asked.receipt } };
}
