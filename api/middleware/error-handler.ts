import type { NextFunction, Request, Response } from 'express';
import type { AppDeps } from '../context.js';
import { AppError, errorEnvelope, isDependencyDown } from '../../shared/errors.js';
import { SealedRecordUnreadable } from '../../shared/crypto/envelope.js';
import { answerRecorded, sendJson } from '../respond.js';
import { isRecordConflict } from '../../shared/db/idempotency-records.js';
import { AmountError } from '../../shared/domain/money.js';
import { InsufficientFundsError } from '../../shared/domain/ledger.js';
import { httpAnswerOf } from '../http-errors.js';
import { bodyError } from './body.js';
import { noteUndeclared } from '../openapi/error-codes.js';

/** Every error path ends here and leaves as the envelope. A non-AppError is a bug: logged, answered 500 without internals. */
export function errorHandler(deps: AppDeps) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction): void => {
    if (isRecordConflict(err)) {
      // An earlier request holds this key in PostgreSQL (Redis had forgotten it): its answer, not this run's.
      answerRecorded(req, res, deps).then(
        (answered) => answered || answerError(deps, AppError.unavailable('Writes are temporarily unavailable; retry with the same Idempotency-Key.'), req, res),
        (sendErr: unknown) => req.state.log.error({ err: String(sendErr) }, 'could not send the recorded response'),
      );
      return;
    }
    let appError: AppError;
    const raised = (err as { status?: unknown } | null)?.status;
    if (err instanceof AppError) appError = err;
    // Errors Express or body-parser raise about the request itself (malformed JSON, bad percent-encoding).
    else if (typeof raised === 'number' && raised >= 400 && raised < 500) appError = bodyError(err);
    // Domain errors that are not AppErrors still answer as the contract says, never 500.
    else if (err instanceof AmountError) appError = AppError.invalid(`Amount refused: ${err.message}.`);
    else if (err instanceof InsufficientFundsError) appError = AppError.invalidState('Not enough funds for this operation.');
    else if (err instanceof SealedRecordUnreadable) {
      // A row this deployment's ENCRYPTION_KEYS cannot open: configuration (or storage), not a bug in the request.
      req.state.log.error({ keyId: err.keyId, reason: err.reason }, 'a stored record does not open with ENCRYPTION_KEYS');
      appError = AppError.unavailable('This record cannot be read right now; the operator has been alerted.', 60);
    } else if (isDependencyDown(err)) {
      req.state.log.error({ err: (err as Error).message }, 'a dependency is unreachable');
      appError = AppError.unavailable('A service we depend on is unreachable; retry shortly.');
    } else {
      req.state.log.error({ err: err instanceof Error ? { message: err.message, stack: err.stack } : String(err) }, 'unhandled error');
      appError = new AppError('internal_error', 'Something went wrong on our side. It has been logged; retry later or contact support with the requestId.');
    }
    answerError(deps, appError, req, res);
  };
}

function answerError(deps: AppDeps, appError: AppError, req: Request, res: Response): void {
  // The document promises each operation's codes; an answer outside them is drift between code and spec.
  if (req.state.route && noteUndeclared(req.state.route, appError.code)) {
    req.state.log.warn({ operationId: req.state.route.operationId, code: appError.code }, 'error code not declared for this operation in the OpenAPI document');
  }
  const body = errorEnvelope(appError.code, appError.message, req.state.id, appError.details);
  const { status, headers } = httpAnswerOf(appError);
  sendJson(req, res, deps, status, body, headers).catch((sendErr: unknown) => {
    req.state.log.error({ err: String(sendErr) }, 'could not send error response');
  });
}

export function notFoundRoute(_req: Request, _res: Response, next: NextFunction): void {
  next(new AppError('not_found', 'No such route.'));
}
