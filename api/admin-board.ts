import type { NextFunction, Request, Response, Router } from 'express';
import express from 'express';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queues } from '../shared/queues/producer.js';
import { AppError } from '../shared/errors.js';

export const BOARD_PATH = '/admin/queues';

/**
 * Every board action (add, edit, retry, promote, clean, pause, empty, remove...) is a PUT, POST or PATCH; a job a
 * person adds or edits could name a send, so the board only reads. Operators re-drive work through the API or the CLI.
 */
function readOnly(req: Request, _res: Response, next: NextFunction): void {
  if (req.method === 'GET' || req.method === 'HEAD') return next();
  next(new AppError('insufficient_scope', 'The queue board is read-only: re-drive work with POST /transactions/{id}/retry or refund, or the admin CLI.', { required_scope: 'none: the board has no write actions' }));
}

/** Bull Board over every queue, read-only (the UI hides its buttons; the guard refuses what a script sends anyway). */
export function queueBoard(queues: Queues): Router {
  const adapter = new ExpressAdapter();
  adapter.setBasePath(BOARD_PATH);
  createBullBoard({
    queues: Object.values(queues).map((q) => new BullMQAdapter(q, { readOnlyMode: true, allowRetries: false })),
    serverAdapter: adapter,
  });
  const router = express.Router();
  router.use(readOnly, adapter.getRouter() as Router);
  return router;
}
