import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

// A JSON-RPC relay in front of an EVM node (Anvil) that fails the methods a test chooses, the way a real provider
// does under load: an error answer (a rate limit, a failing node), an empty one (a node lagging behind: "no such
// receipt"), or no answer at all (a timeout). Batches are relayed request by request, each failing or not on its own.

/**
 * What to do with a call: relay it (false), answer a JSON-RPC error (true), answer `null` as a lagging node does
 * ('null'), or never answer ('timeout').
 */
export type RpcFault = (method: string, params: unknown) => boolean | 'null' | 'timeout';

export interface RpcProxy {
  url: string;
  /** Calls seen per method (relayed or failed). */
  calls: Map<string, number>;
  /** Calls failed per method. */
  failed: Map<string, number>;
  /** Replaces the fault rule (`() => false`: a healthy node again). */
  setFail(fail: RpcFault): void;
  /** Rewrites relayed results (a node that follows another fork for a while); null: relayed unchanged. */
  setRewrite(rewrite: RpcRewrite | null): void;
  close(): Promise<void>;
}

/** A relayed call's result as the test wants the node to answer it. */
export type RpcRewrite = (method: string, params: unknown, result: unknown) => unknown;

interface RpcRequest {
  jsonrpc: '2.0';
  id: number | string | null;
  method: string;
  params?: unknown;
}

/** -32000: a server error viem does not retry, so a test sees the failure at once. */
const INJECTED = { code: -32000, message: 'injected fault: upstream unavailable' };

export async function startRpcProxy(upstreamUrl: string, options: { fail?: RpcFault } = {}): Promise<RpcProxy> {
  let fail: RpcFault = options.fail ?? (() => false);
  let rewrite: RpcRewrite | null = null;
  const calls = new Map<string, number>();
  const failed = new Map<string, number>();
  const held = new Set<ServerResponse>();
  const sockets = new Set<Socket>();
  const bump = (m: Map<string, number>, method: string) => m.set(method, (m.get(method) ?? 0) + 1);

  async function answer(req: RpcRequest): Promise<unknown | 'timeout'> {
    bump(calls, req.method);
    const verdict = fail(req.method, req.params);
    if (verdict) {
      bump(failed, req.method);
      if (verdict === 'timeout') return 'timeout';
      return verdict === 'null' ? { jsonrpc: '2.0', id: req.id, result: null } : { jsonrpc: '2.0', id: req.id, error: INJECTED };
    }
    const res = await fetch(upstreamUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(req) });
    const relayed = (await res.json()) as { result?: unknown };
    return rewrite && 'result' in relayed ? { ...relayed, result: rewrite(req.method, req.params, relayed.result) } : relayed;
  }

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as RpcRequest | RpcRequest[];
        const answers = await Promise.all((Array.isArray(body) ? body : [body]).map(answer));
        if (answers.includes('timeout')) {
          held.add(res); // never answered: the client's own timeout decides
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(Array.isArray(body) ? answers : answers[0]));
      } catch (err) {
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(String(err));
      }
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    failed,
    setFail(next) {
      fail = next;
    },
    setRewrite(next) {
      rewrite = next;
    },
    async close() {
      for (const s of sockets) s.destroy();
      held.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
