import express, { type Express } from 'express';
import type { AppDeps } from './context.js';
import { AppError } from '../shared/errors.js';
import { buildDocument } from './openapi/document.js';
import { compileValidators } from './openapi/validator.js';
import { routes, schemas } from './routes/index.js';
import { BUSINESS_BASE, type RouteDef } from './routes/route.js';
import { businessRouter } from './router.js';
import { requestContext } from './middleware/request-context.js';
import { authenticate } from './middleware/authenticate.js';
import { parseBody } from './middleware/body.js';
import { gate } from './middleware/gate.js';
import { errorHandler, notFoundRoute } from './middleware/error-handler.js';
import { ApiKeyCache } from './middleware/api-key-cache.js';
import { BOARD_PATH, queueBoard } from './admin-board.js';
import { basicAuth, operatorFailures } from './middleware/basic-auth.js';
import { mountDocsPage } from './docs-page.js';
import { DARAJA_CALLBACK_BASE, darajaCallbacks, MOMO_CALLBACK_BASE, momoCallbacks } from './provider-callbacks.js';
import { registry as metrics, reportQueueDepth } from '../shared/metrics.js';

export interface BuiltApp {
  app: Express;
  keyCache: ApiKeyCache;
  document: ReturnType<typeof buildDocument>;
}

const READY_PROBE_MS = 2000;

/** 'ok' or 'unreachable', within READY_PROBE_MS: a dependency that hangs is as not-ready as one that refuses. */
function probe(check: Promise<unknown>): Promise<'ok' | 'unreachable'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'unreachable'>((resolve) => (timer = setTimeout(() => resolve('unreachable'), READY_PROBE_MS)));
  return Promise.race([check.then(() => 'ok' as const, () => 'unreachable' as const), late]).finally(() => clearTimeout(timer));
}

/**
 * `Expect` other than 100-continue: an expectation we cannot meet (RFC 9110 lets us refuse it). Node hands these to
 * the app through `checkExpectation` (http-server.ts) instead of answering a bare 417 itself.
 */
function refuseExpectation(req: express.Request, _res: express.Response, next: express.NextFunction): void {
  const expect = req.headers.expect;
  if (expect !== undefined && expect.trim().toLowerCase() !== '100-continue') {
    return next(AppError.invalid('The Expect header may only be 100-continue.', [{ path: 'Expect', in: 'header', message: 'must be 100-continue' }]));
  }
  next();
}

/** The web application, without listening: tests and main.ts both build it. */
export function buildApp(deps: AppDeps, options: { extraRoutes?: RouteDef[] } = {}): BuiltApp {
  // extraRoutes: tests mount operations (a failing or slow one) behind the very same pipeline.
  const allRoutes = [...routes, ...(options.extraRoutes ?? [])];
  const document = buildDocument(allRoutes, schemas);
  const validators = compileValidators(document, allRoutes);
  const documentJson = JSON.stringify(document);
  const keyCache = new ApiKeyCache(deps.ds, deps.config.apiKeyCacheTtlMs);

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', deps.config.trustProxy);
  app.use(requestContext(deps), refuseExpectation);

  app.get('/health', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/ready', async (_req, res) => {
    const [pg, redis] = await Promise.all([probe(deps.ds.query('SELECT 1')), probe(deps.redis.ping())]);
    const ready = pg === 'ok' && redis === 'ok';
    if (!ready) res.setHeader('Retry-After', '5');
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'not_ready', checks: { postgres: pg, redis } });
  });
  app.get('/openapi.json', (_req, res) => {
    res.type('application/json').send(documentJson);
  });
  mountDocsPage(app, { title: document.info.title, specUrl: '/openapi.json' });
  if (deps.config.adminUser && deps.config.adminPassword) {
    const operators = basicAuth(deps.config.adminUser, deps.config.adminPassword, operatorFailures(deps.scripts, deps.config.redisPrefix));
    app.use(BOARD_PATH, operators, queueBoard(deps.queues));
    // Prometheus, behind the same operators' credentials (off with the board when they are unset).
    reportQueueDepth(deps.queues);
    app.get('/metrics', operators, async (_req, res) => {
      res.type(metrics.contentType).send(await metrics.metrics());
    });
  }

  app.use(DARAJA_CALLBACK_BASE, darajaCallbacks(deps));
  app.use(MOMO_CALLBACK_BASE, momoCallbacks(deps));
  // Matched operations run access checks -> gate -> handler; anything unmatched is counted by the gate, then 404.
  app.use(BUSINESS_BASE, authenticate(deps, keyCache), parseBody(), businessRouter(allRoutes, document, validators, deps, gate(deps)));
  app.use(notFoundRoute);
  app.use(errorHandler(deps));
  return { app, keyCache, document };
}
