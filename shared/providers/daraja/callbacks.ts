// Daraja's callback bodies (CONTRACT §13): the STK Push result `Body.stkCallback`, and the B2C / B2B / Transaction
// Status `Result`. Each is schema-checked before it is stored; parsing reads our reference and the outcome.
import { Ajv } from 'ajv';
import type { ProviderCallback, ProviderKind } from '../provider.js';
import { outcomeOf } from './result-codes.js';

/** The path segment Daraja posts to, by the request that named it. */
export const DARAJA_CALLBACK_KINDS = ['stk', 'result', 'status', 'timeout'] as const;
export type DarajaCallbackKind = (typeof DARAJA_CALLBACK_KINDS)[number];

const code = { type: ['integer', 'string'], pattern: '^[0-9A-Za-z.]{1,20}$' };
const text = { type: 'string', maxLength: 1000 };
const items = { type: 'array', maxItems: 50, items: { type: 'object', required: ['Key'], properties: { Key: { type: 'string', maxLength: 100 } } } };

const STK = {
  type: 'object', required: ['Body'],
  properties: {
    Body: {
      type: 'object', required: ['stkCallback'],
      properties: {
        stkCallback: {
          type: 'object', required: ['MerchantRequestID', 'CheckoutRequestID', 'ResultCode', 'ResultDesc'],
          properties: {
            MerchantRequestID: { type: 'string', minLength: 1, maxLength: 100 }, CheckoutRequestID: { type: 'string', minLength: 1, maxLength: 100 },
            ResultCode: code, ResultDesc: text,
            CallbackMetadata: { type: 'object', properties: { Item: items } },
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
      type: 'object', required: ['ResultCode', 'OriginatorConversationID', 'ConversationID'],
      properties: {
        ResultType: { type: ['integer', 'string'] }, ResultCode: code, ResultDesc: text,
        OriginatorConversationID: { type: 'string', minLength: 1, maxLength: 100 }, ConversationID: { type: 'string', minLength: 1, maxLength: 100 },
        TransactionID: { type: 'string', maxLength: 100 },
        ResultParameters: { type: 'object', properties: { ResultParameter: { oneOf: [items, items.items] } } },
        ReferenceData: { type: 'object' },
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

/** Key/Value lists come as an array, or as one object when there is one item. */
function params(list: unknown): Record<string, unknown> {
  const entries = Array.isArray(list) ? list : list && typeof list === 'object' ? [list] : [];
  return Object.fromEntries(entries.map((e: { Key: string; Value?: unknown }) => [e.Key, e.Value]));
}

/**
 * A callback as an outcome. `stk`: matched by CheckoutRequestID (our reference is not echoed). `result`: B2C echoes our
 * OriginatorConversationID; B2B is matched by ConversationID. `status`: the Transaction Status result, our reference
 * in ReferenceData's Occasion; it says Completed or not. `timeout`: the request sat in Daraja's queue too long: a
 * temporary failure (the status check follows it up).
 */
export function parseDarajaCallback(kind: ProviderKind | DarajaCallbackKind, body: unknown): ProviderCallback | null {
  if (kind === 'stk' || kind === 'collection') {
    if (!validDarajaCallback('stk', body)) return null;
    const cb = (body as any).Body.stkCallback;
    const outcome = outcomeOf('collection', String(cb.ResultCode), cb.ResultDesc, cb.CheckoutRequestID);
    const receipt = params(cb.CallbackMetadata?.Item).MpesaReceiptNumber;
    return { kind: 'collection', reference: null, outcome, receipt: typeof receipt === 'string' ? receipt : undefined };
  }
  const which = kind === 'payout' ? 'result' : kind;
  if (!validDarajaCallback(which, body)) return null;
  const r = (body as any).Result;
  if (which === 'status') {
    const reference = params(r.ReferenceData?.ReferenceItem).Occasion;
    if (String(r.ResultCode) !== '0' || typeof reference !== 'string') return null;
    const p = params(r.ResultParameters?.ResultParameter);
    const completed = p.TransactionStatus === 'Completed';
    const outcome = completed
      ? { status: 'succeeded' as const, provider_reference: r.ConversationID }
      : outcomeOf('payout', String(p.ResultCode ?? 'failed'), `M-Pesa reports the payout ${String(p.TransactionStatus ?? 'not completed')}.`, r.ConversationID);
    return { kind: 'payout', reference, outcome, receipt: typeof p.ReceiptNo === 'string' ? p.ReceiptNo : undefined };
  }
  const code = which === 'timeout' ? '1037' : String(r.ResultCode);
  return { kind: 'payout', reference: r.OriginatorConversationID, conversationId: r.ConversationID, outcome: outcomeOf('payout', code, r.ResultDesc, r.ConversationID), receipt: r.TransactionID || undefined };
}
