// A JSON-RPC proxy in front of Anvil that fails the way hosted RPCs fail: HTTP 5xx, JSON-RPC errors, 429 rate limits,
// requests that never answer, and lagging answers (a load-balanced node a few blocks behind: receipts, transactions
// and logs of the newest blocks are not there yet, and its head is lower). Each request draws its fate from the seed
// and its place in its method's sequence. The service talks to the proxy; the harness talks to Anvil directly.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { draw, type Plan } from './schedule.js';

export type RpcFault = 'http5xx' | 'rpc_error' | 'rate_limit' | 'timeout' | 'sent_no_answer' | 'lag' | 'outage';

export interface RpcFaultProxy {
  url: string;
  /** Faults are drawn only while active (the run switches them off to reach quiescence). */
  active: boolean;
  injected: Record<RpcFault, number>;
  /** Every request fails with HTTP 503 for `ms`. */
  outage(ms: number): void;
  close(): Promise<void>;
}

// Lookups a lagging node answers from its older view.
const LOOKUPS = new Set(['eth_getTransactionReceipt', 'eth_getTransactionByHash', 'eth_getLogs', 'eth_blockNumber']);

async function body(req: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of req) text += chunk;
  return text;
}

export async function startRpcFaults(target: string, plan: Plan): Promise<RpcFaultProxy> {
  const counters = new Map<string, number>();
  const injected: Record<RpcFault, number> = { http5xx: 0, rpc_error: 0, rate_limit: 0, timeout: 0, sent_no_answer: 0, lag: 0, outage: 0 };
  let outageUntil = 0;
  const held = new Set<ServerResponse>();

  const forward = async (text: string): Promise<{ status: number; text: string }> => {
    const res = await fetch(target, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: text });
    return { status: res.status, text: await res.text() };
  };
  const call = async (method: string, params: unknown[]): Promise<any> => JSON.parse((await forward(JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }))).text).result;

  /** The answer of a node `lag` blocks behind the head, for a lookup already answered by the real one. */
  async function lagged(method: string, answer: any, lag: number): Promise<any> {
    const head = BigInt(await call('eth_blockNumber', []));
    const seen = head - BigInt(lag);
    if (method === 'eth_blockNumber') return `0x${(seen < 0n ? 0n : seen).toString(16)}`;
    if (method === 'eth_getLogs') return Array.isArray(answer) ? answer.filter((l: { blockNumber: string }) => BigInt(l.blockNumber) <= seen) : answer;
    if (answer && answer.blockNumber && BigInt(answer.blockNumber) > seen) return null;
    return answer;
  }

  const server = createServer(async (req, res) => {
    const text = await body(req);
    let parsed: any;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
    const send = (status: number, payload: unknown) => res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(payload));
    // Batches and anything unparsable pass through untouched.
    if (!proxy.active || !parsed || Array.isArray(parsed)) {
      try {
        const answer = await forward(text);
        return res.writeHead(answer.status, { 'Content-Type': 'application/json' }).end(answer.text);
      } catch {
        return send(502, { message: 'upstream unreachable' });
      }
    }
    const method = String(parsed.method);
    if (Date.now() < outageUntil) {
      injected.outage++;
      return send(503, { message: 'Service Unavailable' });
    }
    const n = (counters.get(method) ?? 0) + 1;
    counters.set(method, n);
    let r = draw(plan.seed, `${method}#${n}`);
    const { rpc } = plan;
    const pick = (rate: number) => {
      const hit = r < rate;
      r -= rate;
      return hit;
    };
    if (pick(rpc.http5xx)) {
      injected.http5xx++;
      return send(502, { message: 'Bad Gateway' });
    }
    if (pick(rpc.rpcError)) {
      injected.rpc_error++;
      return send(200, { jsonrpc: '2.0', id: parsed.id, error: { code: -32603, message: 'internal error' } });
    }
    if (pick(rpc.rateLimit)) {
      injected.rate_limit++;
      return send(429, { jsonrpc: '2.0', id: parsed.id, error: { code: 429, message: 'Too Many Requests' } });
    }
    if (pick(rpc.timeout)) {
      // A write may have reached the node before the answer was lost; a read simply never answers.
      if (method === 'eth_sendRawTransaction') {
        injected.sent_no_answer++;
        await forward(text).catch(() => null);
      } else injected.timeout++;
      held.add(res);
      setTimeout(() => {
        held.delete(res);
        res.destroy();
      }, 20_000);
      return;
    }
    try {
      const answer = await forward(text);
      if (LOOKUPS.has(method) && pick(rpc.lag)) {
        const reply = JSON.parse(answer.text);
        if (reply.result !== undefined) {
          const lag = 1 + Math.floor(draw(plan.seed, `${method}#${n}:lag`) * plan.rpc.lagBlocks);
          reply.result = await lagged(method, reply.result, lag);
          injected.lag++;
          return send(200, reply);
        }
      }
      res.writeHead(answer.status, { 'Content-Type': 'application/json' }).end(answer.text);
    } catch {
      send(502, { message: 'upstream unreachable' });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxy: RpcFaultProxy = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    active: true,
    injected,
    outage(ms) {
      outageUntil = Date.now() + ms;
    },
    async close() {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return proxy;
}
