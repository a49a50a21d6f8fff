// What MTN MoMo says about a request (CONTRACT §17): the status GET's answer and the callback (PUT or POST) carry the
// same body, `{ amount, currency, externalId, payer | payee, payerMessage, payeeNote, status, reason?,
// financialTransactionId? }`. `status` is PENDING, SUCCESSFUL or FAILED; `reason` names a failure (a string, or
// `{ code, message }` in older deployments). Unknown extra fields are accepted.
import { Ajv } from 'ajv';
import type { StkFailureCode } from '../../kernel/stk-results.js';
import type { ProviderCallback, ProviderKind, ProviderOutcome } from '../provider.js';

/** A request MTN knows, as its status GET or callback reports it. */
export interface MomoStatus {
  status: 'PENDING' | 'SUCCESSFUL' | 'FAILED';
  reason: string | null;
  externalId: string | null;
  financialTransactionId: string | null;
  amount: string | null;
}

/** The outcome, and whether MTN says a payout ended without moving money so a new one may be sent (new UUID). */
export type MomoOutcome = ProviderOutcome & { ended?: boolean };

// Refusals no retry can fix (CONTRACT §17); every other FAILED reason is temporary.
const PERMANENT = new Set(['PAYEE_NOT_FOUND', 'PAYER_NOT_FOUND', 'NOT_ALLOWED', 'INVALID_CURRENCY', 'APPROVAL_REJECTED']);
const INVALID_RECEIVER = new Set(['PAYEE_NOT_FOUND']);

const party = { type: 'object', properties: { partyIdType: { type: 'string', maxLength: 20 }, partyId: { type: ['string', 'number'] } } };
const STATUS = {
  type: 'object', required: ['status'],
  properties: {
    status: { enum: ['PENDING', 'SUCCESSFUL', 'FAILED'] },
    reason: { oneOf: [{ type: 'string', maxLength: 200 }, { type: 'object', properties: { code: { type: 'string', maxLength: 200 }, message: { type: 'string' } } }, { type: 'null' }] },
    externalId: { type: 'string', maxLength: 100 },
    financialTransactionId: { type: ['string', 'number'] },
    amount: { type: ['string', 'number'] },
    currency: { type: 'string', maxLength: 3 },
    payer: party, payee: party,
  },
};
const valid = new Ajv({ allErrors: false, strict: false }).compile(STATUS);

const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : null);

/** The body as a status, or null when it is not one (a 404's `{ code, message }`, anything else). */
export function readMomoStatus(body: unknown): MomoStatus | null {
  if (!valid(body)) return null;
  const b = body as Record<string, any>;
  const reason = typeof b.reason === 'string' ? b.reason : str(b.reason?.code);
  return { status: b.status, reason, externalId: str(b.externalId), financialTransactionId: str(b.financialTransactionId), amount: str(b.amount) };
}

/** Only MTN's reason codes (upper-case words) ever reach a message: nothing else from the body is repeated. */
const safeReason = (reason: string | null) => (reason && /^[A-Z_]{1,60}$/.test(reason) ? reason : 'no reason given');

/**
 * A FAILED collection ends its prompt whatever MTN's reason (CONTRACT §17, §18): the payer is asked again only by a new
 * collection, and the code is one of the prompt-ended codes, so a success MTN reports afterwards still funds it (§14).
 */
const COLLECTION_ENDED: Record<string, { code: StkFailureCode; why: string }> = {
  APPROVAL_REJECTED: { code: 'collection_declined', why: 'The payer rejected the MTN MoMo request' },
  PAYMENT_NOT_APPROVED: { code: 'collection_declined', why: 'The payer did not approve the MTN MoMo request' },
  TRANSACTION_CANCELED: { code: 'collection_declined', why: 'The MTN MoMo request was cancelled' },
  PAYER_NOT_FOUND: { code: 'collection_declined', why: 'The payer\'s number has no MTN MoMo account' },
  EXPIRED: { code: 'collection_timeout', why: 'The payer did not approve the MTN MoMo request in time' },
  COULD_NOT_PERFORM_TRANSACTION: { code: 'collection_timeout', why: 'The payer did not approve the MTN MoMo request in time' },
  NOT_ENOUGH_FUNDS: { code: 'payer_insufficient_funds', why: 'The payer\'s MTN MoMo balance is insufficient' },
};

/** A reason an error answer (HTTP 4xx `{ code, message }`) or a FAILED status gives, as an outcome for `kind`. */
export function failedOutcome(kind: ProviderKind, reason: string | null, referenceId: string): MomoOutcome {
  const said = safeReason(reason);
  if (kind === 'collection') {
    const known = reason ? COLLECTION_ENDED[reason] : undefined;
    const failure = known
      ? { code: known.code, message: `${known.why} (${said}).` }
      : { code: 'collection_failed' as const, message: `MTN MoMo did not collect the payment (${said}); nothing was collected.` };
    return { status: 'declined', provider_reference: referenceId, failure };
  }
  if (reason && PERMANENT.has(reason)) {
    const invalid = INVALID_RECEIVER.has(reason);
    return {
      status: 'rejected', provider_reference: referenceId,
      failure: { code: invalid ? 'invalid_receiver' : 'payout_rejected', message: `MTN MoMo refused the payout (${said}).${invalid ? ' Check the beneficiary\'s details.' : ''}` },
    };
  }
  return { status: 'temporary_failure', provider_reference: referenceId, ended: true, failure: { code: 'provider_unavailable', message: `MTN MoMo could not complete the payout for now (${said}).` } };
}

/** A status as an outcome: the request's id at MTN is `provider_reference`; financialTransactionId is the receipt. */
export function momoOutcome(kind: ProviderKind, status: MomoStatus, referenceId: string): MomoOutcome {
  if (status.status === 'SUCCESSFUL') return { status: 'succeeded', provider_reference: referenceId, ...(status.financialTransactionId ? { receipt: status.financialTransactionId } : {}) };
  if (status.status === 'PENDING') return { status: 'pending', provider_reference: referenceId };
  return failedOutcome(kind, status.reason, referenceId);
}

/**
 * A callback as a claim to corroborate: matched by `externalId` (our reference, sent with every request). It moves
 * nothing by itself (CONTRACT §14): the status GET decides. Null: not a body MTN sends.
 */
export function parseMomoCallback(kind: ProviderKind, body: unknown): (ProviderCallback & { said: MomoStatus }) | null {
  const status = readMomoStatus(body);
  if (!status?.externalId) return null;
  return {
    kind, reference: status.externalId, claim: true, said: status, outcome: momoOutcome(kind, status, ''),
    ...(status.financialTransactionId ? { receipt: status.financialTransactionId } : {}), ...(status.amount ? { amount: status.amount } : {}),
  };
}

/** A callback body as stored (CONTRACT §15): the MSISDN of the payer or payee redacted to its last 4 digits. */
export function redactMomoBody(body: unknown): unknown {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return body;
  const copy: Record<string, unknown> = { ...(body as Record<string, unknown>) };
  for (const side of ['payer', 'payee']) {
    const p = copy[side] as Record<string, unknown> | undefined;
    if (p && typeof p === 'object' && p.partyId !== undefined) {
      const id = String(p.partyId);
      copy[side] = { ...p, partyId: id.length > 4 ? `${'*'.repeat(id.length - 4)}${id.slice(-4)}` : '****' };
    }
  }
  return copy;
}
