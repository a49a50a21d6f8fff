// The Daraja stand-in behind the two fault relays of relays.ts. The provider relay faults Daraja's POSTs under
// /mpesa/ (HTTP 5xx, timeouts, executed with the answer dropped, outages); the callback relay loses, duplicates,
// delays, reorders and contradicts its callbacks. Both record the truth as the fake told it, before any fault: which
// payout requests it accepted, which collections and payouts succeeded. That record is how the run counts executions
// without asking anything of the fake itself.
import type { IncomingMessage } from 'node:http';
import { startRelayPair, type ProviderFault, type RelayPair } from './relays.js';
import type { Plan } from './schedule.js';

export type DarajaFault = ProviderFault;

export interface AcceptedPayout { reference: string; conversationId: string; path: string; at: number }
export interface AcceptedCollection { phone: string; amount: number; checkoutRequestId: string; at: number }

export interface DarajaFaults extends RelayPair {
  payouts: AcceptedPayout[];
  collections: AcceptedCollection[];
  /** The fake's own verdicts: ConversationID (payouts) or CheckoutRequestID (collections) -> ResultCode ('0' = success). */
  outcomes: Map<string, string>;
}

const PAYMENT_PATHS = /\/(b2c\/v3|b2b\/v1)\/paymentrequest$/;
const STK_PUSH = '/mpesa/stkpush/v1/processrequest';

export async function startDarajaFaults(fakeUrl: string, plan: Plan, requestTimeoutMs: number): Promise<DarajaFaults> {
  // Success STK callbacks as the fake writes them: a forged one copies their item shape.
  let itemShape: 'Name' | 'Key' = 'Name';
  const payouts: AcceptedPayout[] = [];
  const collections: AcceptedCollection[] = [];
  const outcomes = new Map<string, string>();

  /** What the fake accepted, read from its answers (the request may still be faulted on the way back). */
  function record(_method: string, path: string, _headers: IncomingMessage['headers'], request: any, status: number, answer: any): void {
    if (status !== 200 || !answer || String(answer.ResponseCode) !== '0' || !request) return;
    if (PAYMENT_PATHS.test(path)) {
      const reference = String(path.includes('b2c') ? request.OriginatorConversationID : request.Occassion ?? request.Occasion);
      payouts.push({ reference, conversationId: String(answer.ConversationID), path, at: Date.now() });
    } else if (path === STK_PUSH) {
      collections.push({ phone: String(request.PhoneNumber), amount: Number(request.Amount), checkoutRequestId: String(answer.CheckoutRequestID), at: Date.now() });
    }
  }

  /** The fake's verdict in a callback, before anything is done to it. */
  function learn(body: any): void {
    const stk = body?.Body?.stkCallback;
    if (stk) {
      outcomes.set(String(stk.CheckoutRequestID), String(stk.ResultCode));
      const items = stk.CallbackMetadata?.Item;
      if (Array.isArray(items) && items.length) itemShape = 'Name' in items[0] ? 'Name' : 'Key';
      return;
    }
    const result = body?.Result;
    if (!result?.ConversationID) return;
    const params = [result.ResultParameters?.ResultParameter ?? []].flat() as { Key?: string; Value?: unknown }[];
    const status = params.find((p) => p.Key === 'TransactionStatus');
    // A status answer speaks of the payment it names; a payout's own result is its verdict.
    if (status) {
      if (!outcomes.has(String(result.ConversationID))) outcomes.set(String(result.ConversationID), status.Value === 'Completed' ? '0' : 'status:' + String(status.Value));
    } else outcomes.set(String(result.ConversationID), String(result.ResultCode));
  }

  /** A callback saying the opposite of `body`, or null when there is nothing to contradict. */
  function contradiction(body: any): any {
    const stk = body?.Body?.stkCallback;
    if (stk) {
      if (String(stk.ResultCode) === '0') return { Body: { stkCallback: { MerchantRequestID: stk.MerchantRequestID, CheckoutRequestID: stk.CheckoutRequestID, ResultCode: 1032, ResultDesc: 'Request cancelled by user' } } };
      const item = (name: string, value: unknown) => ({ [itemShape]: name, Value: value });
      return { Body: { stkCallback: {
        MerchantRequestID: stk.MerchantRequestID, CheckoutRequestID: stk.CheckoutRequestID, ResultCode: 0, ResultDesc: 'The service request is processed successfully.',
        CallbackMetadata: { Item: [item('Amount', 1500), item('MpesaReceiptNumber', 'SFORGED001'), item('TransactionDate', 20261125120000), item('PhoneNumber', 254700000000)] },
      } } };
    }
    const result = body?.Result;
    if (!result || String(result.ResultCode) !== '0') return null;
    const params = [result.ResultParameters?.ResultParameter ?? []].flat() as { Key?: string }[];
    if (params.some((p) => p.Key === 'TransactionStatus')) return null;
    return { Result: { ...result, ResultCode: 2001, ResultDesc: 'The initiator information is invalid.', TransactionID: '' } };
  }

  const pair = await startRelayPair(plan.seed, {
    fakeUrl, rates: plan.daraja, requestTimeoutMs, headers: ['authorization'],
    faultable: (method, path) => (method === 'POST' && path.startsWith('/mpesa/') ? { executes: true } : null),
    fateName: (path) => path,
    outageAnswer: { requestId: 'fault', errorCode: '503.001.01', errorMessage: 'Service Unavailable' },
    http5xxAnswer: { requestId: 'fault', errorCode: '500.003.02', errorMessage: 'System is busy. Please try again in few minutes.' },
    record,
  }, { rates: plan.callbacks, accepted: { ResultCode: 0, ResultDesc: 'Accepted' }, learn, contradiction });
  return Object.assign(pair, { payouts, collections, outcomes });
}
