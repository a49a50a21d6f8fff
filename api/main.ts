import type { Server } from 'node:http';
import { buildApp } from './app.js';
import { httpServer } from './http-server.js';
import { closeAppDeps, createAppDeps } from './deps.js';
import { watchKeyChanges } from './middleware/api-key-cache.js';
import { createWorkerRedis } from '../shared/queues/connections.js';
import { configureFor } from '../shared/config.js';
import { NEEDS } from '../shared/config-processes.js';
import { catchStopSignals } from '../shared/stop-signals.js';

const signals = catchStopSignals();

configureFor(NEEDS.web, 'the web process');

const deps = await createAppDeps();
const { app, keyCache } = buildApp(deps);
const keyChanges = watchKeyChanges(deps.config.redisUrl, deps.config.redisPrefix, keyCache, createWorkerRedis);
let stopping = false;
const server: Server = httpServer(app, deps.log);
server.once('error', (err: Error) => {
  deps.log.fatal({ err: err.message, port: deps.config.port }, 'web cannot listen');
  process.exit(1);
});
// The ready line names where the API and its reference are (PUBLIC_BASE_URL, else localhost and the port); the message
// itself stays the one scripts wait for.
const base = deps.config.publicBaseUrl;
server.listen(deps.config.port, () => deps.log.info({ port: deps.config.port, url: `${base}/api/v1/business`, docs: `${base}/docs` }, 'web listening'));

async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  deps.log.info({ signal }, 'web draining');
  const timer = setTimeout(() => {
    deps.log.error('drain timed out; exiting');
    process.exit(1);
  }, deps.config.shutdownTimeoutMs).unref();
  server.close(async () => {
    keyChanges.stop();
    await closeAppDeps(deps);
    clearTimeout(timer);
    deps.log.info('web stopped');
    process.exit(0);
  });
  // Keep-alive clients are told to go, and sockets are closed as soon as their request in flight has finished.
  server.on('request', (_req, res) => res.setHeader('Connection', 'close'));
  server.closeIdleConnections();
  setInterval(() => server.closeIdleConnections(), 100).unref();
}
signals.drainWith((signal) => void shutdown(signal));
