import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { startApi, type ApiHarness } from './harness.js';
import { startPools, type RunningPools } from './workers.js';
import { httpServer } from '../../api/http-server.js';
import { POOLS } from '../../shared/queues/registry.js';

export interface RunningService {
  api: ApiHarness;
  pools: RunningPools;
  /** Where the web process listens, e.g. http://127.0.0.1:41234. */
  baseUrl: string;
  close(): Promise<void>;
}

/** The web process alone, listening on a real port (no worker pools): what a client that only reads and writes rows meets. */
export async function startWebApi(options: { env?: Record<string, string>; log?: Logger } = {}): Promise<{ api: ApiHarness; baseUrl: string; close(): Promise<void> }> {
  const api = await startApi({ env: options.env, log: options.log });
  const server = httpServer(api.app, api.deps.log);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    api,
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await api.close();
    },
  };
}

/** The service as a client meets it: the web process listening on a real port, and every worker pool running. */
export async function startService(options: { env?: Record<string, string>; log?: Logger } = {}): Promise<RunningService> {
  const web = await startWebApi(options);
  const pools = await startPools([...POOLS], { env: options.env });
  return {
    api: web.api,
    pools,
    baseUrl: web.baseUrl,
    async close() {
      await pools.close();
      await web.close();
    },
  };
}
