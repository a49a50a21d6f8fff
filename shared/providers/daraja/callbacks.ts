// Daraja's callback bodies (CONTRACT §13, §14 "Provider truth"), as Safaricom posts them: the STK Push result
// `Body.stkCallback` (CallbackMetadata.Item entries are `{ Name, Value }`, Value absent for Balance), and the B2C / B2B /
// Transaction Status / queue-timeout `Result` (ResultParameters.ResultParameter entries are `{ Key, Value }`, one object
// or a list; ReferenceData.ReferenceItem likewise). Any well-formed JSON is stored; these schemas decide what is read.
import { Ajv } from 'ajv';
import type { ProviderCallback, ProviderKind } from '../provider.js';
import { outcomeOf, safeDescription, stkOutcome } from './result-codes.js';
import { redactPhone } from '../../domain/payer-data.js';

/** The path segment Daraja posts to, by the request that named it. */
export const DARAJA_CALLBACK_KINDS = ['stk', 'result', 'status', 'timeout'] as const;
export type DarajaCallbackKind = (typeof DARAJA_CALLBACK_KINDS)[number];

/** Transaction Status ResultCodes saying M-Pesa has no record of the request: it did not pay and will not. */
export const NOT_FOUND_CODES = new Set(['2032']);
/** TransactionStatus values of a request M-Pesa knows ended without paying. */
const ENDED_UNPAID = new Set(['Failed', 'Declined', 'Cancelled', 'Expired']);

const code = { type: ['integer', 'string'], pattern: '^[0-9A-Za-z.]{1,20}$' };
const text = { type: 'string', maxLength: 1000 };
const list = (name: 'Name' | 'Key') => {
  const item = { type: 'object', required: [name], properties: { [name]: { type: 'string', maxLength: 100 } } };
  return { oneOf: [{ type: 'array', maxItems: 50, items: item }, item] };
};

const STK = {
  type: 'object', required: ['Body'],
  properties: {
    Body: {
      type: 'object', required: ['stkCallback'],
      properties: {
        stkCallback: {
          type: 'object', required: ['MerchantRequestID', 'CheckoutRequestID', 'ResultCode'],
          properties: {
            MerchantRequestID: { type: 'string', minLength: 1, maxLength: 100 }, CheckoutRequestID: { type: 'string', minLength: 1, maxLength: 100 },
            ResultCode: code, ResultDesc: text,
            CallbackMetadata: { type: 'object', properties: { Item: list('Name') } },
          },
        },
      },
    },
  },
};

const RESULT = {
  type: 'object', required: ['Result'],
  properties: {
    Result: {
      type: 'object', required: ['ResultCode', 'OriginatorConversationID'],
      properties: {
        ResultType: { type: ['integer', 'string'] }, ResultCode: code, ResultDesc: text,
        OriginatorConversationID: { type: 'string', minLength: 1, maxLength: 100 }, ConversationID: { type: 'string', maxLength: 100 },
        TransactionID: { type: 'string', maxLength: 100 },
        ResultParameters: { type: 'object', properties: { ResultParameter: list('Key') } },
        ReferenceData: { type: 'object', properties: { ReferenceItem: list('Key') } },
      },
    },
  },
};

const ajv = new Ajv({ allErrors: false, strict: false });
const validators: Record<DarajaCallbackKind, ReturnType<typeof ajv.compile>> = {
  stk: ajv.compile(STK), result: ajv.compile(RESULT), status: ajv.compile(RESULT), timeout: ajv.compile(RESULT),
};

export function isDarajaCallbackKind(kind: string): kind is DarajaCallbackKind {
  return (DARAJA_CALLBACK_KINDS as readonly string[]).includes(kind);
}

/** Whether the body has the shape Daraja posts to that path. */
export function validDarajaCallback(kind: DarajaCallbackKind, body: unknown): boolean {
  return validators[kind](body) as boolean;
}

/** Name/Value (STK) or Key/Value (results) lists come as an array, or as one object when there is one item. */
function params(entries: unknown, name: 'Name' | 'Key'): Record<string, unknown> {
  const items = Array.isArray(entries) ? entries : entries && typeof entries === 'object' ? [entries] : [];
  return Object.fromEntries(items.map((e: Record<string, unknown>) => [String(e[name]), e.Value]));
}

const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : undefined);

/**
 * An STK callback's PhoneNumber, read once on receipt to take its digests (the stored body keeps it redacted); null
 * when the body holds none.
 */
export function darajaPayerPhone(kind: string, body: unknown): string | null {
  if ((kind !== 'stk' && kind !== 'collection') || !validDarajaCallback('stk', body)) return null;
  return str(params((body as any).Body.stkCallback.CallbackMetadata?.Item, 'Name').PhoneNumber) ?? null;
}

/**
 * A callback as facts. `stk`: matched by CheckoutRequestID (or MerchantRequestID), with the receipt, amount and phone
 * to check against the request. `result`: B2C echoes our OriginatorConversationID; B2B is matched by ConversationID.
 * `status`: the Transaction Status result, matched by our reference in Occasion or by the query's own
 * OriginatorConversationID; Completed pays, not found (2032) or an unpaid end (its TransactionReasonCode read by the
 * payout rule) says the request did not pay, anything else says nothing. `timeout`: the request sat in Daraja's queue too long and may still run: no answer at all.
 */
export function parseDarajaCallback(kind: ProviderKind | DarajaCallbackKind, body: unknown): ProviderCallback | null {
  if (kind === 'stk' || kind === 'collection') {
    if (!validDarajaCallback('stk', body)) return null;
    const cb = (body as any).Body.stkCallback;
    const outcome = stkOutcome(String(cb.ResultCode), cb.ResultDesc, cb.CheckoutRequestID);
    const meta = params(cb.CallbackMetadata?.Item, 'Name');
    return {
      kind: 'collection', reference: null, outcome, merchantRequestId: cb.MerchantRequestID, claim: true,
      receipt: str(meta.MpesaReceiptNumber), amount: str(meta.Amount),
    };
  }
  const which = kind === 'payout' ? 'result' : kind;
  if (!validDarajaCallback(which, body)) return null;
  const r = (body as any).Result;
  const resultCode = String(r.ResultCode);
  if (which === 'status') {
    const occasion = str(params(r.ReferenceData?.ReferenceItem, 'Key').Occasion) ?? null;
    const p = params(r.ResultParameters?.ResultParameter, 'Key');
    const base = { kind: 'payout' as const, reference: occasion, queryId: r.OriginatorConversationID };
    if (resultCode === '0' && p.TransactionStatus === 'Completed') {
      const receipt = str(p.ReceiptNo) ?? str(r.TransactionID);
      return { ...base, answer: 'paid', outcome: { status: 'succeeded', provider_reference: str(p['Conversation ID']) ?? null }, receipt };
    }
    if (resultCode === '0' && ENDED_UNPAID.has(String(p.TransactionStatus))) {
      // TransactionReasonCode holds the request's own result code: temporary or permanent by the payout rule.
      const reason = str(p.TransactionReasonCode);
      const said = `M-Pesa reports the payout ${safeDescription(p.TransactionStatus)}${reason ? ` (code ${safeDescription(reason)})` : ''}.`;
      const read = reason && reason !== '0' ? outcomeOf('payout', reason, said, null) : null;
      const outcome = read ?? { status: 'temporary_failure' as const, provider_reference: null, failure: { code: 'provider_unavailable', message: said } };
      return { ...base, answer: read ? (read.status === 'temporary_failure' ? 'failed_temporary' : 'failed_permanent') : 'failed', outcome };
    }
    if (NOT_FOUND_CODES.has(resultCode)) {
      const said = `M-Pesa has no record of the payout (code ${resultCode}).`;
      return { ...base, answer: 'absent', outcome: { status: 'temporary_failure', provider_reference: null, failure: { code: 'provider_unavailable', message: said } } };
    }
    // Pending, an unknown status, or the query itself refused: nothing is known about the payout.
    return { ...base, answer: null, outcome: { status: 'pending', provider_reference: null } };
  }
  const conversation = str(r.ConversationID);
  if (which === 'timeout') {
    return { kind: 'payout', reference: r.OriginatorConversationID, conversationId: conversation, timedOut: true, outcome: { status: 'pending', provider_reference: conversation ?? null } };
  }
  const outcome = outcomeOf('payout', resultCode, r.ResultDesc, conversation ?? null);
  const receipt = resultCode === '0' ? str(r.TransactionID) ?? str(params(r.ResultParameters?.ResultParameter, 'Key').TransactionReceipt) : undefined;
  // M-Pesa's own result for the request: a claim about it, which only the status check turns into a new request.
  return { kind: 'payout', reference: r.OriginatorConversationID, conversationId: conversation, outcome, receipt, claim: true };
}

/** A Kenyan MSISDN anywhere in a value: `2547...`, `+2547...` or `07...` (B2C's ReceiverPartyPublicName starts with one). */
const MSISDN_IN_TEXT = /(?<![\d*])(?:\+?254|0)[17]\d{8}(?!\d)/g;
const PHONE_KEY = /phone|msisdn/i;
/**
 * M-Pesa's identifiers (`CheckoutRequestID`, `ConversationID`, `TransactionID`, a receipt) are kept as sent: a result
 * is matched by them, and one whose digits happen to look like a phone (`...b0785470880`) would match nothing. Daraja
 * spells them `...ID`; a camel-case `...Id` (MoMo's `partyId` is a phone) is not one of them.
 */
const IDENTIFIER_KEY = /(?:ID|Receipt|ReceiptNo|ReceiptNumber)$/;

function redactMsisdn(found: string): string {
  if (found.startsWith('+')) return redactPhone(found);
  return found.startsWith('254') ? redactPhone(`+${found}`).slice(1) : redactPhone(found);
}

function redactText(value: string, wholly: boolean): string {
  return wholly && /\d{4}/.test(value) ? redactMsisdn(value.replace(/\s/g, '')) : value.replace(MSISDN_IN_TEXT, redactMsisdn);
}

/**
 * A callback body as stored (CONTRACT §15): every phone number redacted (`254*****4149`), wherever it sits (STK's
 * `{ Name: 'PhoneNumber', Value }`, a B2C receiver's public name, any field named like a phone); M-Pesa's identifiers
 * and the rest unchanged.
 */
export function redactCallbackBody(body: unknown, phoneField = false): unknown {
  if (typeof body === 'string') return redactText(body, phoneField);
  if (typeof body === 'number') return phoneField || /^254[17]\d{8}$/.test(String(body)) ? redactText(String(body), true) : body;
  if (Array.isArray(body)) return body.map((v) => redactCallbackBody(v, phoneField));
  if (!body || typeof body !== 'object') return body;
  const entry = body as Record<string, unknown>;
  // Daraja's name/value lists: the value is a phone when its name says so.
  const named = typeof entry.Name === 'string' ? entry.Name : typeof entry.Key === 'string' ? entry.Key : '';
  return Object.fromEntries(Object.entries(entry).map(([k, v]) => {
    const key = k === 'Value' && named ? named : k;
    if (IDENTIFIER_KEY.test(key) && !PHONE_KEY.test(key) && (typeof v === 'string' || typeof v === 'number')) return [k, v];
    return [k, redactCallbackBody(v, PHONE_KEY.test(key))];
  }));
}
