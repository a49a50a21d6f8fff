// Daraja posts its results to PUBLIC_BASE_URL/providers/daraja/<token>/<kind> (CONTRACT §13). Not a business API
// operation (no API key, not in /openapi.json): authenticated by the secret path token and the optional IP
// allowlist, stored raw once per body whatever its shape, acknowledged at once; the providers pool does the work.
import { createHash, timingSafeEqual } from 'node:crypto';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { AppDeps } from './context.js';
import { AppError } from '../shared/errors.js';
import { inUnit } from '../shared/db/unit-of-work.js';
import { providerJobs } from '../shared/domain/provider-results.js';
import { isDarajaCallbackKind, parseDarajaCallback, redactCallbackBody, type DarajaCallbackKind } from '../shared/providers/daraja/callbacks.js';

export const DARAJA_CALLBACK_BASE = '/providers/daraja';

function sameToken(given: string, expected: string | null): boolean {
  if (!expected) return false;
  const [a, b] = [createHash('sha256').update(given).digest(), createHash('sha256').update(expected).digest()];
  return timingSafeEqual(a, b);
}

/** `::ffff:10.0.0.1` and `10.0.0.1` are one sender. */
const plainIp = (ip: string | undefined) => (ip ?? '').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');

const notFound = () => new AppError('not_found', 'No such route.');

export function darajaCallbacks(deps: AppDeps): Router {
  const router = express.Router();
  const allowed = new Set(deps.config.daraja.callbackAllowedIps.map(plainIp));
  // Anything but the right token and sender is the 404 of a route that does not exist: nothing to probe.
  router.post('/:token/:kind', (req: Request, _res: Response, next: NextFunction) => {
    const token = String(req.params.token);
    if (!sameToken(token, deps.config.daraja.callbackToken) || !isDarajaCallbackKind(String(req.params.kind))) return next(notFound());
    if (allowed.size && !allowed.has(plainIp(req.ip))) return next(notFound());
    next();
  }, express.text({ limit: '64kb', type: () => true }), async (req: Request, res: Response, next: NextFunction) => {
    const kind = String(req.params.kind);
    // Whatever arrives on a valid path is kept for operators and acknowledged, so Daraja never retries it and nothing
    // is lost to a shape we did not expect: the providers pool reads what it can (CONTRACT §14).
    const raw = typeof req.body === 'string' ? req.body : '';
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      body = { unparsed: raw };
    }
    try {
      const hash = createHash('sha256').update(`${kind}\n${JSON.stringify(body)}`).digest('hex');
      // Kept with its phone numbers redacted (CONTRACT §15); who paid is kept as the payer's digest, which is what an
      // unnamed prompt's success is matched by (collectionRequestFor).
      const payer = parseDarajaCallback(kind as DarajaCallbackKind, body)?.payer ?? null;
      const stored = await inUnit(deps, async (unit) => {
        const rows: { id: string }[] = await unit.em.query(
          `INSERT INTO provider_callbacks (provider, kind, body, body_hash, source_ip, payer_key) VALUES ('mpesa_daraja', $1, $2, $3, $4, $5)
           ON CONFLICT (body_hash) DO NOTHING RETURNING id`,
          [kind, JSON.stringify(redactCallbackBody(body)), hash, plainIp(req.ip), payer],
        );
        if (rows[0]) await unit.stage(providerJobs.callback(rows[0].id));
        return rows.length > 0;
      });
      req.state.log.info({ provider: 'mpesa_daraja', kind, duplicate: !stored }, 'provider callback');
      // Daraja's expected acknowledgement; a duplicate is acknowledged the same, so it stops sending it.
      res.status(200).json({ ResultCode: 0, ResultDesc: 'Accepted' });
    } catch (err) {
      next(err);
    }
  });
  return router;
}
