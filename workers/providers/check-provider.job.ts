import { inUnit } from '../../shared/db/unit-of-work.js';
import { collectionCameToNothing, loadPaymentIntent } from '../../shared/domain/payment-intents.js';
import { applyProviderResult, INTENT_CHECK_ROUNDS, MAX_CHECK_ROUNDS, providerJobs, type CheckSubject } from '../../shared/domain/provider-results.js';
import { loadTransaction, lockTransaction, scopeOf, type TransactionRow } from '../../shared/domain/transactions.js';
import { decideOnrampIn } from '../../shared/domain/onramp-moves.js';
import { decidePayoutIn } from '../../shared/domain/payout-moves.js';
import { type ProviderKind, type ProviderOutcome } from '../../shared/providers/provider.js';
import { providerFor } from '../../shared/providers/providers.js';
import { momoServes, statusQueryAfterMs } from '../../shared/providers/live-rails.js';
import { defineJob, type WorkerDeps } from '../job-definition.js';

const NO_RECORD = { code: 'provider_unavailable', message: 'MTN MoMo has no record of the payout request; it is sent again.' };

const PROMPT_TIMED_OUT = {
  code: 'collection_timeout',
  message: `M-Pesa never answered the payment prompt (no reply, no callback, nothing to ask STK Query about after ${MAX_CHECK_ROUNDS} checks). A payment that still arrives is credited.`,
};

const PROMPT_UNDECIDED = {
  code: 'provider_unavailable',
  message: `M-Pesa gave no final answer for the payment prompt after ${INTENT_CHECK_ROUNDS} status checks. A payment it reports later is credited.`,
};

interface Asked {
  kind: ProviderKind;
  reference: string;
  currency: string;
  scope: { businessId: string; environment: 'sandbox' | 'live' };
  outcome: ProviderOutcome | null;
}

/** The steps that wait for a provider's result: an on-ramp's collection, an off-ramp's payout. */
function stillWaiting(tx: TransactionRow): boolean {
  return (tx.direction === 'onramp' && tx.status === 'awaiting_funds') || (tx.direction === 'offramp' && tx.status === 'processing');
}

/** Whether the provider's final answer to a collection request is known (paid, declined, refused). */
async function promptAnswered(deps: WorkerDeps, reference: string): Promise<boolean> {
  const rows: { status: string | null }[] = await deps.ds.query(
    `SELECT status FROM provider_requests WHERE kind = 'collection' AND reference = $1`, [reference]);
  return !rows[0] || ['succeeded', 'declined', 'rejected'].includes(rows[0].status ?? '');
}

/** What is still waiting for a result, and the provider's answer for it; null when it has moved on. */
async function ask(deps: WorkerDeps, subject: CheckSubject): Promise<Asked | null> {
  const providerDeps = { db: deps.ds, config: deps.config, log: deps.log };
  if ('transactionId' in subject) {
    const tx = await loadTransaction(deps.ds, subject.transactionId);
    if (!tx || !stillWaiting(tx)) return null;
    const kind: ProviderKind = tx.direction === 'onramp' ? 'collection' : 'payout';
    return { kind, reference: tx.id, currency: tx.currency, scope: scopeOf(tx), outcome: await providerFor(tx.environment, providerDeps, tx.currency).queryStatus(kind, tx.id) };
  }
  const intent = await loadPaymentIntent(deps.ds, subject.intentId);
  if (!intent) return null;
  const reference = `${intent.id}-${subject.attempt}`;
  // An intent paid another way (or expired, or prompted again) still has this prompt out: the payer may pay it, and
  // with its callback lost only the provider can say so. It is asked until its own answer is final, and a payment
  // it reports is credited as a late one.
  const current = intent.status === 'processing' && intent.collection_attempts === subject.attempt;
  if (!current && (await promptAnswered(deps, reference))) return null;
  // Asked now: the sweeper starts another series of checks only for a prompt no check has asked about for a while.
  await deps.ds.query(`UPDATE provider_requests SET updated_at = now() WHERE environment = $1 AND kind = 'collection' AND reference = $2`, [intent.environment, reference]);
  return { kind: 'collection', reference, currency: intent.currency, scope: { businessId: intent.business_id, environment: intent.environment }, outcome: await providerFor(intent.environment, providerDeps, intent.currency).queryStatus('collection', reference) };
}

/**
 * No callback came within DARAJA_STATUS_QUERY_AFTER_MS: STK Query answers a collection at once; Transaction Status
 * acknowledges, and its result comes as a callback. Still nothing after MAX_CHECK_ROUNDS: the business is told.
 */
export const checkProviderJob = defineJob({
  name: 'provider.check',
  async process(job, deps) {
    const subject = job.data;
    const asked = await ask(deps, subject);
    if (!asked) return 'moved on';
    const { outcome } = asked;
    return inUnit(deps, async (unit) => {
      if (outcome && outcome.status !== 'pending') {
        // The query's own answer: its corroboration is itself. A payout MTN says FAILED for now may be sent again.
        return applyProviderResult(unit, deps.config, { kind: asked.kind, reference: asked.reference, outcome });
      }
      // MTN answers its status at once: a payout it has no record of did not pay, and goes again under the same id.
      if (!outcome && asked.kind === 'payout' && momoServes(deps.config, asked.currency) && asked.scope.environment === 'live') {
        const [sent]: { id: string | null }[] = await unit.em.query(
          `SELECT provider_reference AS id FROM provider_requests WHERE environment = 'live' AND kind = 'payout' AND reference = $1`, [asked.reference]);
        return applyProviderResult(unit, deps.config, { kind: 'payout', reference: asked.reference, answer: 'absent', outcome: { status: 'temporary_failure', provider_reference: sent?.id ?? null, failure: NO_RECORD } });
      }
      if (subject.round < MAX_CHECK_ROUNDS) {
        await unit.stage(providerJobs.check({ ...subject, round: subject.round + 1 }, statusQueryAfterMs(deps.config, asked.currency)), asked.scope);
        return 'still pending';
      }
      // A prompt M-Pesa never named (its answer lost, no callback) cannot be asked about, and its lifetime on the payer's
      // phone is long over: it timed out. A success that still arrives is matched by payer and amount and credited
      // (an on-ramp failed on collection_timeout moves on to funded; an intent records a late payment).
      const unnamed = asked.kind === 'collection' && outcome === null;
      if (!('transactionId' in subject)) {
        // A prompt M-Pesa named is asked about longer, less often: its answer decides whether the payer paid.
        if (!unnamed && subject.round < INTENT_CHECK_ROUNDS) {
          await unit.stage(providerJobs.check({ ...subject, round: subject.round + 1 }, 4 * statusQueryAfterMs(deps.config, asked.currency)), asked.scope);
          return 'still pending (asked less often)';
        }
        const intent = await loadPaymentIntent(unit.em, subject.intentId);
        if (!intent || intent.status !== 'processing' || intent.collection_attempts !== subject.attempt) return 'moved on';
        return collectionCameToNothing(unit, intent, unnamed ? PROMPT_TIMED_OUT : PROMPT_UNDECIDED, null);
      }
      // Read again under the lock: a result may have moved it meanwhile (completed, or failed and refunded), and only a
      // request still waiting is handed to the business.
      const tx = await lockTransaction(unit, subject.transactionId);
      if (!tx || !stillWaiting(tx)) return `moved on (${tx?.status ?? 'gone'})`;
      if (unnamed) {
        await decideOnrampIn(unit, tx.id, { kind: 'collection_unpaid', failure: PROMPT_TIMED_OUT });
        return 'failed (prompt timed out)';
      }
      const failure = { code: 'provider_unavailable', message: `M-Pesa gave no result after ${MAX_CHECK_ROUNDS} status checks.` };
      if (tx.direction === 'onramp') await decideOnrampIn(unit, tx.id, { kind: 'collection_stalled', failure });
      else await decidePayoutIn(unit, null, tx.id, { kind: 'stalled', failure });
      return 'action_required';
    });
  },
});
