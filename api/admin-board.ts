import type { Router } from 'express';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queues } from '../shared/queues/producer.js';

export const BOARD_PATH = '/admin/queues';

/** Bull Board over every queue. */
export function queueBoard(queues: Queues): Router {
  const adapter = new ExpressAdapter();
  adapter.setBasePath(BOARD_PATH);
  createBullBoard({ queues: Object.values(queues).map((q) => new BullMQAdapter(q)), serverAdapter: adapter });
  return adapter.getRouter() as Router;
}
