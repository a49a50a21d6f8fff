// The two fault relays every provider stand-in sits behind (daraja-faults.ts, momo-faults.ts say what each provider's
// requests and callbacks look like). The provider relay (the service -> the stand-in) answers HTTP 5xx, times out,
// forwards a request and drops its answer (executed, but nobody heard), or refuses everything for an outage. The
// callback relay (the stand-in -> the service) loses, duplicates, delays, reorders and contradicts callbacks. Each
// request draws its fate from the seed and its place in its name's sequence, so a seed replays.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { draw, type Plan } from './schedule.js';

export type ProviderFault = 'http5xx' | 'timeout' | 'executed_no_answer' | 'outage'
  | 'callback_lost' | 'callback_duplicate' | 'callback_late' | 'callback_out_of_order' | 'callback_contradicting';

export const noFaults = (): Record<ProviderFault, number> => ({
  http5xx: 0, timeout: 0, executed_no_answer: 0, outage: 0, callback_lost: 0, callback_duplicate: 0, callback_late: 0, callback_out_of_order: 0, callback_contradicting: 0,
});

export async function readBody(req: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of req) text += chunk;
  return text;
}

export const json = (text: string): any => {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
};

export const send = (res: ServerResponse, status: number, payload: unknown) => res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(payload));

/** The n-th request of a name meets the fate the seed gave it. */
export function fates(seed: number): (name: string) => number {
  const counters = new Map<string, number>();
  return (name) => {
    const n = (counters.get(name) ?? 0) + 1;
    counters.set(name, n);
    return draw(seed, `${name}#${n}`);
  };
}

/** Picks faults off one draw: each rate takes its slice of [0, 1). */
function picker(r: number): (rate: number) => boolean {
  return (rate) => (r < rate ? true : ((r -= rate), false));
}

export interface ProviderRelayOptions {
  fakeUrl: string;
  rates: { http5xx: number; timeout: number; executedNoAnswer: number };
  requestTimeoutMs: number;
  /** Request headers passed on to the stand-in (lower case). */
  headers: string[];
  /** Whether a request may meet a fault, and whether it may be executed with its answer dropped. */
  faultable(method: string, path: string): { executes: boolean } | null;
  /** The fate's name for a request (its sequence is per name). */
  fateName(path: string): string;
  outageAnswer: unknown;
  http5xxAnswer: unknown;
  /** What the stand-in answered a request, before any fault on the way back. */
  record(method: string, path: string, headers: IncomingMessage['headers'], request: any, status: number, answer: any): void;
}

export interface Relay {
  url: string;
  server: Server;
}

async function listen(server: Server): Promise<Relay> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

export async function closeRelays(...relays: Relay[]): Promise<void> {
  for (const { server } of relays) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

export async function startProviderRelay(o: ProviderRelayOptions, state: { active: boolean; injected: Record<ProviderFault, number>; outageUntil: number }, fate: (name: string) => number): Promise<Relay> {
  return listen(createServer(async (req, res) => {
    const path = new URL(req.url!, 'http://x').pathname;
    const text = req.method === 'GET' ? '' : await readBody(req);
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    for (const name of o.headers) if (typeof req.headers[name] === 'string') headers[name] = req.headers[name] as string;
    const forward = async () => {
      const answer = await fetch(`${o.fakeUrl}${req.url}`, { method: req.method, headers, body: req.method === 'GET' ? undefined : text });
      const answerText = await answer.text();
      o.record(req.method!, path, req.headers, json(text), answer.status, json(answerText));
      return { status: answer.status, text: answerText };
    };
    const faultable = o.faultable(req.method!, path);
    if (state.active && faultable) {
      if (Date.now() < state.outageUntil) {
        state.injected.outage++;
        return send(res, 503, o.outageAnswer);
      }
      const pick = picker(fate(o.fateName(path)));
      if (pick(o.rates.http5xx)) {
        state.injected.http5xx++;
        return send(res, 500, o.http5xxAnswer);
      }
      if (pick(o.rates.timeout)) {
        state.injected.timeout++;
        setTimeout(() => res.destroy(), o.requestTimeoutMs + 1000);
        return;
      }
      if (faultable.executes && pick(o.rates.executedNoAnswer)) {
        state.injected.executed_no_answer++;
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
  }));
}

export interface CallbackRelayOptions {
  seed: number;
  rates: Plan['callbacks'];
  /** Where callbacks go (the service's web origin); read at each delivery. */
  target(): string;
  /** What the relay answers the stand-in for a callback it took over. */
  accepted: unknown;
  /** The stand-in's verdict in a callback, learnt before anything is done to it. */
  learn(body: any): void;
  /** A callback saying the opposite of `body`, or null when there is nothing to contradict. */
  contradiction(body: any): any;
}

export interface CallbackRelay extends Relay {
  /** Resolves once every delayed or held callback has been delivered. */
  flush(): Promise<void>;
}

export async function startCallbackRelay(o: CallbackRelayOptions, state: { active: boolean; injected: Record<ProviderFault, number> }, fate: (name: string) => number): Promise<CallbackRelay> {
  const pending = new Set<Promise<unknown>>();
  let heldBack: (() => Promise<void>) | null = null;
  const track = <T>(p: Promise<T>) => {
    pending.add(p);
    void p.finally(() => pending.delete(p));
    return p;
  };
  const later = (ms: number, run: () => Promise<unknown>) => track(new Promise((resolve) => setTimeout(resolve, ms)).then(run));
  async function release(): Promise<void> {
    const held = heldBack;
    heldBack = null;
    await held?.();
  }
  const relay = await listen(createServer(async (req, res) => {
    const path = new URL(req.url!, 'http://x').pathname;
    const method = req.method ?? 'POST';
    const body = json(await readBody(req));
    const deliver = async (payload: unknown) => {
      const answer = await fetch(`${o.target()}${path}`, { method, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(payload) }).catch(() => null);
      return { status: answer?.status ?? 502, text: answer ? await answer.text() : '' };
    };
    o.learn(body);
    const accepted = () => send(res, 200, o.accepted);
    const previous = heldBack;
    const { injected } = state;
    if (!state.active || !body) {
      await release();
      const answer = await deliver(body);
      return res.writeHead(answer.status, { 'Content-Type': 'application/json' }).end(answer.text);
    }
    const pick = picker(fate(`callback:${path.split('/').pop()}`));
    const c = o.rates;
    if (pick(c.lost)) {
      injected.callback_lost++;
      return accepted();
    }
    if (pick(c.duplicate)) {
      injected.callback_duplicate++;
      accepted();
      await track(deliver(body));
      await later(200, () => deliver(body));
    } else if (pick(c.late)) {
      injected.callback_late++;
      accepted();
      void later(3000 + Math.floor(draw(o.seed, `late:${injected.callback_late}`) * 5000), () => deliver(body));
    } else if (pick(c.outOfOrder)) {
      injected.callback_out_of_order++;
      accepted();
      // Held until the next callback has gone ahead of it (or 4 s pass).
      let sent = false;
      const once = async () => {
        if (sent) return;
        sent = true;
        await deliver(body);
      };
      heldBack = once;
      void later(4000, once);
    } else if (pick(c.contradicting) && o.contradiction(body)) {
      injected.callback_contradicting++;
      accepted();
      await track(deliver(o.contradiction(body)));
      await later(500, () => deliver(body));
    } else {
      const answer = await track(deliver(body));
      res.writeHead(answer.status, { 'Content-Type': 'application/json' }).end(answer.text);
    }
    // The callback held back before this one goes after it.
    if (previous) {
      if (heldBack === previous) heldBack = null;
      await track(previous());
    }
  }));
  return {
    ...relay,
    async flush() {
      if (heldBack) await release();
      while (pending.size) await Promise.all([...pending]);
    },
  };
}

/** A stand-in's two relays as the run drives them: where the service points, faults on or off, an outage, a flush. */
export interface RelayPair {
  /** The provider's base URL for the service. */
  providerUrl: string;
  /** Where the stand-in sends its callbacks (the callback relay). */
  callbackUrl: string;
  /** Where callbacks are delivered (the service's web origin), set once it listens. */
  callbackTarget: string;
  active: boolean;
  injected: Record<ProviderFault, number>;
  /** Every faultable request refused for `ms`. */
  outage(ms: number): void;
  /** Resolves once every delayed or held callback has been delivered. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export async function startRelayPair(seed: number, provider: ProviderRelayOptions, callbacks: Omit<CallbackRelayOptions, 'seed' | 'target'>): Promise<RelayPair> {
  const state = { active: true, injected: noFaults(), outageUntil: 0 };
  const fate = fates(seed);
  let target = '';
  const providerRelay = await startProviderRelay(provider, state, fate);
  const callbackRelay = await startCallbackRelay({ ...callbacks, seed, target: () => target }, state, fate);
  return {
    providerUrl: providerRelay.url, callbackUrl: callbackRelay.url, injected: state.injected,
    get callbackTarget() {
      return target;
    },
    set callbackTarget(origin: string) {
      target = origin;
    },
    get active() {
      return state.active;
    },
    set active(on: boolean) {
      state.active = on;
    },
    outage(ms) {
      state.outageUntil = Date.now() + ms;
    },
    flush: () => callbackRelay.flush(),
    close: () => closeRelays(providerRelay, callbackRelay),
  };
}
