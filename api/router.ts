import type { Logger } from 'pino';
import express, { type NextFunction, type Request, type RequestHandler, type Response, type Router } from 'express';
import type { AppDeps } from './context.js';
import { AppError } from '../shared/errors.js';
import { check, checkParams, type OperationValidator } from './openapi/validator.js';
import type { HandlerContext, Reply, RouteDef } from './routes/route.js';
import { RenderedRows } from './rendered.js';
import { answeredAs, closeAnswer, replyInUnit, sendJson } from './respond.js';
import type { Unit } from '../shared/db/unit-of-work.js';
import type { RecordRef } from '../shared/db/idempotency-records.js';
import { bodyError, rejectUnstorableText } from './middleware/body.js';
import { sendCsv } from './csv.js';
import { componentSerializer, serializerFor, type Serialize } from './openapi/serializers.js';
import type { OpenApiDocument } from './openapi/document.js';

function expressPath(openapiPath: string): string {
  return openapiPath.replace(/\{([^}]+)\}/g, ':$1');
}

/** Sandbox-only and scope checks, before the gate: a refused request must never replay a stored answer. */
function access(route: RouteDef) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    const auth = req.state.auth!;
    if (route.sandboxOnly && auth.environment !== 'sandbox') {
      req.state.refusal = new AppError('not_found', 'No such route.');
      return next();
    }
    req.state.route = route;
    if (route.scope && !auth.scopes.has(route.scope)) {
      req.state.refusal = new AppError('insufficient_scope', `This API key lacks the ${route.scope} scope.`, { required_scope: route.scope });
    } else if (route.requiresLiveEnabled && auth.environment === 'live' && !auth.liveEnabled) {
      req.state.refusal = new AppError('live_not_enabled', 'This business is not enabled for live money movement yet.');
    }
    next();
  };
}

/** The path parameter that names a transaction on this route, if any (decided once per route). */
function transactionParam(route: RouteDef): string | undefined {
  if (route.pathParams?.transaction_id) return 'transaction_id';
  return /^\/(sandbox\/)?transactions\/\{id\}/.test(route.path) ? 'id' : undefined;
}

/** A created on- or off-ramp's id, so the request's access line names the transaction it started. */
function createdTransaction(body: unknown): string | undefined {
  const b = body as { id?: unknown; direction?: unknown } | null;
  return b && typeof b.id === 'string' && (b.direction === 'offramp' || b.direction === 'onramp') ? b.id : undefined;
}

/** Per operation, after the gate: deferred body errors, schema validation, then the handler. */
function handle(route: RouteDef, validator: OperationValidator, serialize: Serialize, deps: AppDeps, rendered: HandlerContext['rendered']) {
  const txParam = transactionParam(route);
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    try {
      req.state.serialize = serialize;
      if (req.state.bodyError) throw bodyError(req.state.bodyError);
      // Express parses the query string again on every read of req.query: once here.
      const rawQuery = req.query as Record<string, unknown>;
      rejectUnstorableText(rawQuery, 'query');
      const params = checkParams(validator, { ...req.params }, 'path');
      const query = checkParams(validator, { ...rawQuery }, 'query');
      let body: unknown = req.body;
      if (route.body) {
        if (body === undefined && Number(req.headers['content-length'] ?? 0) > 0 && !req.is('application/json')) {
          throw AppError.invalid('Content-Type must be application/json.');
        }
        if (body === undefined && route.body.required !== false) throw AppError.invalid('A JSON request body is required.', [{ path: '(body)', in: 'body', message: 'is required' }]);
        if (body !== undefined) body = check(validator.body, body, 'body');
      } else if (body !== undefined && !(typeof body === 'object' && body !== null && Object.keys(body).length === 0)) {
        throw AppError.invalid('This operation takes no request body.');
      }
      // Every log line about a transaction carries its id (the worker pools do the same from their job's data).
      const transactionId = txParam ? (params as Record<string, string>)[txParam] : undefined;
      if (transactionId) req.state.transactionId = transactionId;
      // Its logger is built on first use, as the request's is: most requests never log but their access line.
      let log: Logger | undefined;
      const ctx = {
        deps, auth: req.state.auth!, body, query, params, requestId: req.state.id,
        get log(): Logger {
          return (log ??= transactionId ? req.state.log.child({ transactionId }) : req.state.log);
        },
        reply: (work: (unit: Unit, record?: RecordRef) => Promise<Reply>) => replyInUnit(deps, req.state, work),
        closeAnswer: () => closeAnswer(deps, req.state),
        rendered,
      };
      if (route.csv && req.accepts(['application/json', 'text/csv']) === 'text/csv') {
        await sendCsv(deps, ctx.auth.keyId, ctx.log, res, route.csv, () => route.csv!.rows(ctx)).catch((err: unknown) => {
          // Headers are gone once the first row left: the client sees a cut answer, never a wrong one.
          if (!res.headersSent) throw err;
          ctx.log.error({ err: (err as Error).message }, 'CSV export cut short');
          res.destroy();
        });
        return;
      }
      const reply = await route.handler(ctx);
      if (reply.recorded !== undefined) answeredAs(req.state, reply.status, reply.recorded, reply.body);
      if (route.method === 'post' && !req.state.transactionId) req.state.transactionId = createdTransaction(reply.body);
      await sendJson(req, res, deps, reply.status, reply.body, reply.headers, 'replayBody' in reply ? reply.replayBody : reply.body);
    } catch (err) {
      next(err);
    }
  };
}

export function businessRouter(
  routes: RouteDef[], document: OpenApiDocument, validators: Map<RouteDef, OperationValidator>, deps: AppDeps, gateMiddleware: RequestHandler,
): Router {
  const router = express.Router();
  // Tests compare every answer with JSON.stringify's: a field its schema leaves out fails the test, not the client.
  const checkAnswers = deps.config.nodeEnv === 'test';
  // One kind of row's texts per name, each kind serialized by one schema: a name asked for with another is a mistake.
  const renderers = new Map<string, { schema: string; rows: RenderedRows }>();
  const rendered = (name: string, schema: string): RenderedRows => {
    let kind = renderers.get(name);
    if (!kind) renderers.set(name, (kind = { schema, rows: new RenderedRows(componentSerializer(document, schema, checkAnswers)) }));
    if (kind.schema !== schema) throw new Error(`rendered rows "${name}" are ${kind.schema}, not ${schema}`);
    return kind.rows;
  };
  for (const route of routes) {
    const check = access(route);
    const run = handle(route, validators.get(route)!, serializerFor(document, route, checkAnswers), deps, rendered);
    // One router layer per operation (access -> gate -> handler composed here): fewer layers to walk per request.
    router[route.method](expressPath(route.path), (req: Request, res: Response, next: NextFunction) =>
      check(req, res, () => gateMiddleware(req, res, (err?: unknown) => (err ? next(err) : run(req, res, next)))),
    );
  }
  // Anything unmatched, OPTIONS included (Express would answer it itself), is counted and answered 404.
  router.use(gateMiddleware, (_req: Request, _res: Response, next: NextFunction) => next(new AppError('not_found', 'No such route.')));
  return router;
}
