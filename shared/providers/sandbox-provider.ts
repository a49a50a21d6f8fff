// The sandbox fiat provider: no network. Outcomes come from the magic values of CONTRACT §9, and every call is
// recorded in provider_requests, so a repeated reference answers what the first call did, as a real provider would.
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { AppError } from '../errors.js';
import { logger } from '../logger.js';
import type { Environment } from '../domain/chains.js';
import { AmountError, formatAmount, scaleOf, toMinor } from '../domain/money.js';
import type { CollectRequest, PaymentProvider, PayoutRequest, ProviderDeps, ProviderKind, ProviderOutcome, Queryable } from './provider.js';
import type { EventScope } from '../domain/events.js';
import { planOnce } from '../db/prepared-client.js';
import { OUTCOME_FIELDS, outcomeColumns, outcomeOfRow, outcomeSet, repeatSandbox, requestRow, SNAPSHOT_COLUMNS, type OutcomeRow, type RequestRow } from './provider-requests.js';

/** Suffixes of a phone number, account number (or other destination) that pick a sandbox outcome. */
export const SANDBOX_MAGIC = Object.freeze({ declinedCollection: '0001', rejectedPayout: '0002', temporaryPayout: '0003' });

// The fields that say where a payout goes, whatever the corridor; the first present one gives the stored last 4.
const DESTINATION_FIELDS = ['phone_number', 'account_number', 'iban', 'till_number', 'paybill_number', 'email'] as const;

/** What provider_requests keeps of a request: enough to spot a reused reference, nothing that identifies a payee. */
interface StoredRequest {
  currency: string;
  amount: string;
  payment_method: string;
  mobile_network?: string;
  destination_last4: string;
}

export interface ProviderCallStats {
  /** Rows recorded for the reference: 0 or 1, whatever the number of calls. */
  requests: number;
  /** Calls made with the reference, replays included. */
  attempts: number;
  /** Calls the provider actually acted on (not answered from the record): a paid payout counts exactly once. */
  evaluations: number;
  outcome: ProviderOutcome | null;
}

/** Deterministic, so a replay and a re-evaluation after a temporary failure carry the same id. */
export function sandboxProviderReference(kind: ProviderKind, reference: string): string {
  return `SBX${createHash('sha256').update(`${kind}:${reference}`).digest('hex').slice(0, 16).toUpperCase()}`;
}

function last4(value: string): string {
  return [...value].slice(-4).join('');
}

function endsWithMagic(field: string, value: string, suffix: string): boolean {
  // An email always ends in its domain, so its magic suffix goes before the @.
  return value.endsWith(suffix) || (field === 'email' && value.split('@')[0].endsWith(suffix));
}

function positiveAmount(currency: string, amount: string): string {
  const scale = scaleOf(currency);
  if (toMinor(amount, scale) <= 0n) throw new AmountError(`"${amount}" is not a positive amount`);
  return formatAmount(amount, scale);
}

function destinationsOf(details: Record<string, string>): [string, string][] {
  const found = DESTINATION_FIELDS.filter((f) => typeof details[f] === 'string' && details[f] !== '').map((f): [string, string] => [f, details[f]]);
  if (found.length === 0) {
    throw new AppError('requirements_not_met', 'The payout details name no destination.', [{ path: 'details', message: `one of ${DESTINATION_FIELDS.join(', ')} is required` }]);
  }
  return found;
}

export function decideCollection(reference: string, phoneNumber: string): ProviderOutcome {
  const provider_reference = sandboxProviderReference('collection', reference);
  if (phoneNumber.endsWith(SANDBOX_MAGIC.declinedCollection)) {
    return { status: 'declined', provider_reference, failure: { code: 'collection_declined', message: 'The payer declined the payment prompt (sandbox: phone number ending in 0001).' } };
  }
  return { status: 'succeeded', provider_reference, receipt: sandboxReceipt('collection', reference) };
}

/** A made-up M-Pesa-like receipt: S and 9 upper-case letters or digits, the same for the same request. */
export function sandboxReceipt(kind: string, reference: string): string {
  return `S${createHash('sha256').update(`${kind}:${reference}`).digest('hex').slice(0, 9).toUpperCase()}`;
}

export function decidePayout(reference: string, destinations: [string, string][]): ProviderOutcome {
  const provider_reference = sandboxProviderReference('payout', reference);
  // A permanent refusal wins over a temporary one when both suffixes appear.
  if (destinations.some(([f, v]) => endsWithMagic(f, v, SANDBOX_MAGIC.rejectedPayout))) {
    return { status: 'rejected', provider_reference, failure: { code: 'payout_rejected', message: 'The provider rejected the beneficiary account (sandbox: destination ending in 0002).' } };
  }
  if (destinations.some(([f, v]) => endsWithMagic(f, v, SANDBOX_MAGIC.temporaryPayout))) {
    return {
      status: 'temporary_failure',
      provider_reference: null,
      failure: { code: 'provider_unavailable', message: 'The provider is temporarily unable to pay out (sandbox: destination ending in 0003).' },
    };
  }
  return { status: 'succeeded', provider_reference, receipt: sandboxReceipt('payout', reference) };
}

export class SandboxProvider implements PaymentProvider {
  readonly id = 'sandbox' as const;
  readonly answersInUnit = true;
  private readonly db: Queryable;
  private readonly log: Logger;

  constructor(deps: ProviderDeps) {
    this.db = deps.db;
    this.log = deps.log ?? logger();
  }

  async collect(req: CollectRequest): Promise<ProviderOutcome> {
    this.checkCall(req.scope, req.reference);
    const request: StoredRequest = {
      currency: req.currency,
      amount: positiveAmount(req.currency, req.amount),
      payment_method: 'mobile_money',
      mobile_network: req.mobile_network,
      destination_last4: last4(req.phone_number),
    };
    return this.record('collection', req.scope, req.reference, request, decideCollection(req.reference, req.phone_number));
  }

  async payout(req: PayoutRequest): Promise<ProviderOutcome> {
    this.checkCall(req.scope, req.reference);
    const destinations = destinationsOf(req.details);
    const request: StoredRequest = {
      currency: req.currency,
      amount: positiveAmount(req.currency, req.amount),
      payment_method: req.payment_method,
      destination_last4: last4(destinations[0][1]),
    };
    return this.record('payout', req.scope, req.reference, request, decidePayout(req.reference, destinations));
  }

  async queryStatus(kind: ProviderKind, reference: string): Promise<ProviderOutcome | null> {
    const row = await requestRow(this.db, { environment: 'sandbox', kind, reference });
    return row && (outcomeOfRow(row) as ProviderOutcome);
  }

  private checkCall(scope: EventScope, reference: string): void {
    // Simulating a live request would report money that never moved.
    if (scope.environment !== 'sandbox') throw new AppError('internal_error', 'The sandbox provider only serves sandbox requests.');
    if (typeof reference !== 'string' || reference.length < 1 || reference.length > 100) throw AppError.invalid('A provider reference is 1 to 100 characters.');
  }

  /**
   * The upsert serializes concurrent calls on the row: the first inserts; later ones count an attempt and get the
   * recorded outcome, except after a temporary failure, which is evaluated again (decideSandboxRepeat, a compare-and-set
   * on the status and evaluations it read). A reference reused for another business or another request matches no row
   * and is refused.
   */
  private async record(kind: ProviderKind, scope: EventScope, reference: string, request: StoredRequest, evaluated: ProviderOutcome): Promise<ProviderOutcome> {
    const rows: (RequestRow & { attempts: number; inserted: boolean })[] = await this.db.query(
      planOnce(`INSERT INTO provider_requests AS p (business_id, environment, kind, reference, request, status, ${OUTCOME_FIELDS.join(', ')})
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
       ON CONFLICT (environment, kind, reference) DO UPDATE SET attempts = p.attempts + 1, updated_at = now()
       WHERE p.business_id = EXCLUDED.business_id AND p.request = EXCLUDED.request
       RETURNING ${SNAPSHOT_COLUMNS}, attempts, (xmax = 0) AS inserted`),
      [scope.businessId, scope.environment, kind, reference, JSON.stringify(request), evaluated.status, ...OUTCOME_FIELDS.map((c) => outcomeSet(evaluated)[c])],
    );
    if (rows.length === 0) {
      throw AppError.invalidState(`The ${kind} reference ${reference} was already sent to the provider with a different request.`);
    }
    // Decided on the row the upsert returned; read again only when it moved on before the write.
    const row: RequestRow = rows[0].inserted ? rows[0] : await repeatSandbox(this.db, { environment: scope.environment, kind, reference }, rows[0], evaluated);
    const outcome = outcomeOfRow(row) as ProviderOutcome;
    this.log.info({ provider: this.id, kind, reference, businessId: scope.businessId, environment: scope.environment, status: outcome.status, attempt: rows[0].attempts }, 'provider request');
    return outcome;
  }
}

/** How often a reference reached the provider (tests prove with it that a payout happened once). */
export async function providerCallStats(db: Queryable, kind: ProviderKind, reference: string, environment: Environment = 'sandbox'): Promise<ProviderCallStats> {
  const rows: (OutcomeRow & { attempts: number; evaluations: number })[] = await db.query(
    `SELECT attempts, evaluations, ${outcomeColumns()} FROM provider_requests WHERE environment = $1 AND kind = $2 AND reference = $3`,
    [environment, kind, reference],
  );
  const row = rows[0];
  return row ? { requests: 1, attempts: row.attempts, evaluations: row.evaluations, outcome: outcomeOfRow(row) as ProviderOutcome } : { requests: 0, attempts: 0, evaluations: 0, outcome: null };
}
