// Two relays around the Daraja stand-in. The provider relay (the service -> the fake) answers HTTP 5xx, times out, or
// forwards a request and then drops the answer (executed, but nobody heard). The callback relay (the fake -> the
// service's PUBLIC_BASE_URL) loses, duplicates, delays, reorders and contradicts callbacks. Both record the truth as
// the fake told it, before any fault: which payout requests it accepted, which collections and payouts succeeded.
// That record is how the run counts executions without asking anything of the fake itself.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { draw, type Plan } from './schedule.js';

export type DarajaFault = 'http5xx' | 'timeout' | 'executed_no_answer' | 'outage'
  | 'callback_lost' | 'callback_duplicate' | 'callback_late' | 'callback_out_of_order' | 'callback_contradicting';

export interface AcceptedPayout { reference: string; conversationId: string; path: string; at: number }
export interface AcceptedCollection { phone: string; amount: number; checkoutRequestId: string; at: number }

export interface DarajaFaults {
  /** DARAJA_BASE_URL for the service. */
  providerUrl: string;
  /** PUBLIC_BASE_URL for the service: callbacks come through here. */
  callbackUrl: string;
  /** Where callbacks are delivered (the service's web origin), set once it listens. */
  callbackTarget: string;
  active: boolean;
  injected: Record<DarajaFault, number>;
  payouts: AcceptedPayout[];
  collections: AcceptedCollection[];
  /** The fake's own verdicts: ConversationID (payouts) or CheckoutRequestID (collections) -> ResultCode ('0' = success). */
  outcomes: Map<string, string>;
  outage(ms: number): void;
  /** Resolves once every delayed or held callback has been delivered. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

const PAYMENT_PATHS = /\/(b2c\/v3|b2b\/v1)\/paymentrequest$/;
const STK_PUSH = '/mpesa/stkpush/v1/processrequest';

async function readBody(req: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of req) text += chunk;
  return text;
}

const json = (text: string): any => {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
};

export async function startDarajaFaults(fakeUrl: string, plan: Plan, requestTimeoutMs: number): Promise<DarajaFaults> {
  const counters = new Map<string, number>();
  const pending = new Set<Promise<unknown>>();
  let outageUntil = 0;
  let heldBack: (() => Promise<void>) | null = null;
  // Success STK callbacks as the fake writes them: a forged one copies their item shape.
  let itemShape: 'Name' | 'Key' = 'Name';
  const faults: DarajaFaults = {
    providerUrl: '', callbackUrl: '', callbackTarget: '', active: true,
    injected: { http5xx: 0, timeout: 0, executed_no_answer: 0, outage: 0, callback_lost: 0, callback_duplicate: 0, callback_late: 0, callback_out_of_order: 0, callback_contradicting: 0 },
    payouts: [], collections: [], outcomes: new Map(),
    outage(ms) {
      outageUntil = Date.now() + ms;
    },
    async flush() {
      if (heldBack) await release();
      while (pending.size) await Promise.all([...pending]);
    },
    async close() {
      for (const s of [provider, callbacks]) {
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
    },
  };
  const track = <T>(p: Promise<T>) => {
    pending.add(p);
    void p.finally(() => pending.delete(p));
    return p;
  };
  const fate = (name: string) => {
    const n = (counters.get(name) ?? 0) + 1;
    counters.set(name, n);
    return draw(plan.seed, `${name}#${n}`);
  };
  const send = (res: ServerResponse, status: number, payload: unknown) => res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(payload));

  const provider = createServer(async (req, res) => {
    const path = new URL(req.url!, 'http://x').pathname;
    const text = req.method === 'GET' ? '' : await readBody(req);
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    if (req.headers.authorization) headers.Authorization = req.headers.authorization;
    const forward = async () => {
      const answer = await fetch(`${fakeUrl}${req.url}`, { method: req.method, headers, body: req.method === 'GET' ? undefined : text });
      const answerText = await answer.text();
      record(path, json(text), answer.status, json(answerText));
      return { status: answer.status, text: answerText };
    };
    const faultable = req.method === 'POST' && path.startsWith('/mpesa/');
    if (faults.active && faultable) {
      if (Date.now() < outageUntil) {
        faults.injected.outage++;
        return send(res, 503, { requestId: 'fault', errorCode: '503.001.01', errorMessage: 'Service Unavailable' });
      }
      let r = fate(path);
      const pick = (rate: number) => (r < rate ? true : ((r -= rate), false));
      if (pick(plan.daraja.http5xx)) {
        faults.injected.http5xx++;
        return send(res, 500, { requestId: 'fault', errorCode: '500.003.02', errorMessage: 'System is busy. Please try again in few minutes.' });
      }
      if (pick(plan.daraja.timeout)) {
        faults.injected.timeout++;
        setTimeout(() => res.destroy(), requestTimeoutMs + 1000);
        return;
      }
      if (pick(plan.daraja.executedNoAnswer)) {
        faults.injected.executed_no_answer++;
        await forward().catch(() => null);
        res.destroy();
        return;
      }
    }
    try {
      const answer = await forward();
      res.writeHead(answer.status, { 'Content-Type': 'application/json' }).end(answer.text);
    } catch {
      send(res, 502, { message: 'fake unreachable' });
    }
  });

  /** What the fake accepted, read from its answers (the request may still be faulted on the way back). */
  function record(path: string, request: any, status: number, answer: any): void {
    if (status !== 200 || !answer || String(answer.ResponseCode) !== '0' || !request) return;
    if (PAYMENT_PATHS.test(path)) {
      const reference = String(path.includes('b2c') ? request.OriginatorConversationID : request.Occassion ?? request.Occasion);
      faults.payouts.push({ reference, conversationId: String(answer.ConversationID), path, at: Date.now() });
    } else if (path === STK_PUSH) {
      faults.collections.push({ phone: String(request.PhoneNumber), amount: Number(request.Amount), checkoutRequestId: String(answer.CheckoutRequestID), at: Date.now() });
    }
  }

  /** The fake's verdict in a callback, before anything is done to it. */
  function learn(body: any): void {
    const stk = body?.Body?.stkCallback;
    if (stk) {
      faults.outcomes.set(String(stk.CheckoutRequestID), String(stk.ResultCode));
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
      if (!faults.outcomes.has(String(result.ConversationID))) faults.outcomes.set(String(result.ConversationID), status.Value === 'Completed' ? '0' : 'status:' + String(status.Value));
    } else faults.outcomes.set(String(result.ConversationID), String(result.ResultCode));
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

  const deliver = async (path: string, body: unknown) => {
    const res = await fetch(`${faults.callbackTarget}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }).catch(() => null);
    return { status: res?.status ?? 502, text: res ? await res.text() : '' };
  };
  const later = (ms: number, run: () => Promise<unknown>) => track(new Promise((resolve) => setTimeout(resolve, ms)).then(run));
  async function release(): Promise<void> {
    const held = heldBack;
    heldBack = null;
    await held?.();
  }

  const callbacks = createServer(async (req, res) => {
    const path = new URL(req.url!, 'http://x').pathname;
    const body = json(await readBody(req));
    learn(body);
    const accepted = () => send(res, 200, { ResultCode: 0, ResultDesc: 'Accepted' });
    const previous = heldBack;
    if (!faults.active || !body) {
      await release();
      const answer = await deliver(path, body);
      return res.writeHead(answer.status, { 'Content-Type': 'application/json' }).end(answer.text);
    }
    let r = fate(`callback:${path.split('/').pop()}`);
    const pick = (rate: number) => (r < rate ? true : ((r -= rate), false));
    const { callbacks: c } = plan;
    if (pick(c.lost)) {
      faults.injected.callback_lost++;
      return accepted();
    }
    if (pick(c.duplicate)) {
      faults.injected.callback_duplicate++;
      accepted();
      await track(deliver(path, body));
      await later(200, () => deliver(path, body));
    } else if (pick(c.late)) {
      faults.injected.callback_late++;
      accepted();
      void later(3000 + Math.floor(draw(plan.seed, `late:${faults.injected.callback_late}`) * 5000), () => deliver(path, body));
    } else if (pick(c.outOfOrder)) {
      faults.injected.callback_out_of_order++;
      accepted();
      // Held until the next callback has gone ahead of it (or 4 s pass).
      let sent = false;
      const once = async () => {
        if (sent) return;
        sent = true;
        await deliver(path, body);
      };
      heldBack = once;
      void later(4000, once);
    } else if (pick(c.contradicting) && contradiction(body)) {
      faults.injected.callback_contradicting++;
      accepted();
      await track(deliver(path, contradiction(body)));
      await later(500, () => deliver(path, body));
    } else {
      const answer = await track(deliver(path, body));
      res.writeHead(answer.status, { 'Content-Type': 'application/json' }).end(answer.text);
    }
    // The callback held back before this one goes after it.
    if (previous) {
      if (heldBack === previous) heldBack = null;
      await track(previous());
    }
  });

  for (const s of [provider, callbacks]) await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  faults.providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
  faults.callbackUrl = `http://127.0.0.1:${(callbacks.address() as AddressInfo).port}`;
  return faults;
}
