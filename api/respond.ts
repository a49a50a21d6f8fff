import type { Request, Response } from 'express';
import type { AppDeps } from './context.js';
import { finishIdempotency } from './middleware/idempotency-store.js';

/**
 * The one way a business answer leaves the service: serialize once, settle the idempotency record
 * (stored for 2xx/4xx, released for 5xx) before the bytes go out, then send.
 */
export async function sendJson(
  req: Request, res: Response, deps: AppDeps, status: number, body: unknown, headers: Record<string, string> = {},
  /** What a replay of this answer shows, when it must differ from the answer itself (a secret is shown once). */
  replayBody: unknown = body,
): Promise<void> {
  const payload = JSON.stringify(body);
  const claim = req.state.idempotency;
  if (claim) {
    req.state.idempotency = undefined;
    await finishIdempotency(deps, claim, status, replayBody === body ? payload : JSON.stringify(replayBody), req.state.id, req.state.log);
  }
  if (res.headersSent) return;
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.status(status).type('application/json').send(payload);
}
