// The live MTN MoMo provider (CONTRACT §17). X-Reference-Id is MTN's idempotency key: the first request of a
// transaction goes under its id (an intent's attempt under a UUID of its own), recorded with the request before it
// leaves. A request whose answer we did not read is asked about (status GET) before anything is sent again; one MTN
// has no record of goes again under the same id (a late arrival answers 409); one MTN says FAILED for a temporary
// reason goes again under a new UUID; a PENDING or unknown one is never sent again under any id.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { MomoSettings } from '../../config-momo.js';
import { MOMO_NETWORK } from '../../config-momo.js';
import { AppError } from '../../errors.js';
import { corridorError } from '../../domain/corridors.js';
import { logger } from '../../logger.js';
import { formatAmount, scaleOf, toMinor } from '../../domain/money.js';
import { ProviderError, type CollectRequest, type PaymentProvider, type PayoutRequest, type ProviderDeps, type ProviderKind, type ProviderOutcome } from '../provider.js';
import { ProviderRequests, type ProviderCapabilities } from '../provider-requests.js';
import { MomoClient } from './momo-client.js';
import { failedOutcome, momoOutcome, readMomoStatus, type MomoOutcome } from './momo-results.js';

type Stored = MomoOutcome | { status: 'sending'; provider_reference: string | null };

/** We name each request (X-Reference-Id) and MTN refuses a second one under that name (409). */
const MOMO: ProviderCapabilities = { namesRequests: true };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** MTN wants the MSISDN with its country code and nothing else: +256 772 123 456 -> 256772123456. */
function momoMsisdn(phone: string): string {
  const digits = phone.replace(/[^\d]/g, '');
  if (!/^\d{9,15}$/.test(digits)) throw new AppError('requirements_not_met', 'The phone number is not a mobile number MTN MoMo can reach.', [{ path: 'phone_number', message: 'must be an E.164 mobile number' }]);
  return digits;
}

export class MomoProvider implements PaymentProvider {
  readonly id = 'mtn_momo' as const;
  private readonly log: Logger;
  private readonly requests: ProviderRequests;

  constructor(deps: ProviderDeps, private readonly client: MomoClient, private readonly settings: MomoSettings) {
    this.log = deps.log ?? logger();
    this.requests = new ProviderRequests(deps.db, this.log, this.id);
  }

  async collect(req: CollectRequest): Promise<ProviderOutcome> {
    const amount = this.amount(req.currency, req.amount, req.mobile_network);
    const body = { amount, currency: req.currency, externalId: req.reference, payer: { partyIdType: 'MSISDN', partyId: momoMsisdn(req.phone_number) }, payerMessage: 'Rampway payment', payeeNote: req.reference };
    return this.send('collection', req, { currency: req.currency, amount: req.amount, payment_method: 'mobile_money' }, body);
  }

  async payout(req: PayoutRequest): Promise<ProviderOutcome> {
    if (req.payment_method !== 'mobile_money') throw corridorError('unsupported_corridor', `MTN MoMo pays mobile money only, not ${req.payment_method}.`, { reason: 'no_live_provider' });
    const amount = this.amount(req.currency, req.amount, req.details.mobile_network);
    const body = { amount, currency: req.currency, externalId: req.reference, payee: { partyIdType: 'MSISDN', partyId: momoMsisdn(req.details.phone_number ?? '') }, payerMessage: 'Rampway payout', payeeNote: req.reference };
    return this.send('payout', req, { currency: req.currency, amount: req.amount, payment_method: req.payment_method }, body);
  }

  /**
   * MTN's answer for the request's current X-Reference-Id (`providerReference` when given): null when MTN has no
   * record of it (safe to send under that id), or when nothing of ours was ever sent.
   */
  async queryStatus(kind: ProviderKind, reference: string, providerReference?: string): Promise<ProviderOutcome | null> {
    const referenceId = providerReference || (await this.requests.stored(kind, reference))?.provider_reference;
    return referenceId ? this.ask(kind, referenceId) : null;
  }

  /** The amount at the currency's scale (UGX: whole shillings), in a currency and network this account serves. */
  private amount(currency: string, amount: string, network: string | undefined): string {
    if (!this.settings.currencies.includes(currency) || network !== MOMO_NETWORK) {
      throw corridorError('unsupported_corridor', `MTN MoMo serves ${this.settings.currencies.join(', ') || 'no currency'} on the mtn network here, not ${currency} on ${network ?? 'an unknown network'}.`, { reason: 'no_live_provider' });
    }
    const scale = scaleOf(currency);
    if (toMinor(amount, scale) <= 0n) throw AppError.invalid(`${amount} ${currency} is not an amount MTN MoMo can move.`);
    return formatAmount(amount, scale);
  }

  private async send(kind: ProviderKind, req: CollectRequest | PayoutRequest, request: Record<string, string>, body: Record<string, unknown>): Promise<ProviderOutcome> {
    // The kernel decides (request-steps.ts): the stored answer, MTN asked about the earlier X-Reference-Id first, or a
    // send under the same id or a new one (the earlier request ended, a payout failed for now or refused and re-sent).
    const claimed = await this.requests.claimStep(kind, req, request, MOMO);
    let step = claimed.step;
    if (step.kind === 'answer') return step.outcome as ProviderOutcome;
    if (step.kind === 'ask') {
      const known = await this.ask(kind, step.providerReference!);
      if (known && !(known.ended && step.ended)) return this.store(kind, req.reference, known);
      step = known ? step.ended! : step.absent;
    }
    if (step.kind !== 'send') throw new AppError('internal_error', 'An MTN request is never waited for: it is answered, asked about or sent.');
    const referenceId = !step.newId && claimed.providerReference ? claimed.providerReference : step.newId || !UUID.test(req.reference) ? randomUUID() : req.reference;
    // Recorded before it leaves, so an unanswered send is asked about by this id; only if no other worker sent it since
    // the claim read it (two jobs at once would each send under a new id: two payments).
    const instead = await this.requests.leaveOrAnswer(kind, req.reference, claimed.sends, referenceId, step.overRefusal);
    if (instead) return instead;
    const answer = await this.client.request(kind, referenceId, body).catch((err: unknown) => {
      // No answer: the request may have reached MTN. The job's next attempt asks its status before anything else.
      if (err instanceof ProviderError && err.providerCode !== 'oauth') this.log.warn({ provider: this.id, kind, reference: req.reference, referenceId }, 'provider answer unknown');
      throw err;
    });
    if (answer.status === 202) return this.store(kind, req.reference, { status: 'pending', provider_reference: referenceId });
    if (answer.status === 409) {
      // MTN already has a request under this id: what it says of it is the answer.
      const known = await this.ask(kind, referenceId);
      return this.store(kind, req.reference, known ?? { status: 'pending', provider_reference: referenceId });
    }
    const code = typeof answer.body?.code === 'string' ? answer.body.code : null;
    if (answer.status >= 500 || answer.status === 429 || answer.status === 401 || answer.status === 403) {
      throw new ProviderError(`MTN MoMo answered HTTP ${answer.status} (${code && /^[A-Z_]{1,60}$/.test(code) ? code : 'no code'}).`, String(answer.status));
    }
    // Refused before it ran (400 with MTN's code, e.g. INVALID_CURRENCY or PAYEE_NOT_FOUND): nothing moved.
    return this.store(kind, req.reference, failedOutcome(kind, code, referenceId));
  }

  /** MTN's word on a request (a status GET, a refusal) is final for a payout once it is not PENDING. */
  private store(kind: ProviderKind, reference: string, outcome: MomoOutcome): Promise<ProviderOutcome> {
    return this.requests.storeWithAnswer(kind, reference, outcome);
  }

  /** GET requesttopay/{id} or transfer/{id}: the outcome, or null for MTN's 404 (no such request). */
  private async ask(kind: ProviderKind, referenceId: string): Promise<MomoOutcome | null> {
    const answer = await this.client.status(kind, referenceId);
    if (answer.status === 404) return null;
    const status = answer.status === 200 ? readMomoStatus(answer.body) : null;
    if (!status) throw new ProviderError(`MTN MoMo's status query gave no status (HTTP ${answer.status}).`, String(answer.status));
    return momoOutcome(kind, status, referenceId);
  }
}
