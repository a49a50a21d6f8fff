// A worker process's own port (WORKER_METRICS_PORT): /health for liveness checks, and /metrics (its jobs, its
// provider calls, the queue depths) behind the operators' basic auth like the web process's, only when they are set.
import type { Server } from 'node:http';
import express from 'express';
import type { Logger } from 'pino';
import { basicAuth } from '../api/middleware/basic-auth.js';
import type { FailedAuth } from '../api/middleware/failed-auth.js';
import { registry, reportQueueDepth } from '../shared/metrics.js';
import type { Queues } from '../shared/queues/producer.js';

export function serveWorkerMetrics(options: {
  port: number; host?: string; user: string | null; password: string | null; queues: Queues; log: Logger;
  /** Wrong credentials counted with the web process's (operatorFailures). */
  failures: FailedAuth;
}): Promise<Server> {
  reportQueueDepth(options.queues);
  const app = express();
  app.disable('x-powered-by');
  app.get('/health', (_req, res) => {
    res.json({ status: 'ok' });
  });
  if (options.user && options.password) {
    app.get('/metrics', basicAuth(options.user, options.password, options.failures), async (_req, res) => {
      res.type(registry.contentType).send(await registry.metrics());
    });
  }
  return new Promise((resolve, reject) => {
    const server = app.listen(options.port, options.host ?? '0.0.0.0', () => {
      options.log.info({ port: options.port, metrics: Boolean(options.user && options.password) }, 'worker health and metrics listening');
      resolve(server);
    });
    server.once('error', reject);
  });
}
