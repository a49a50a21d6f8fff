// Daraja posts its results to PUBLIC_BASE_URL/providers/daraja/<token>/<kind> (CONTRACT §13), MTN MoMo PUTs or POSTs
// them to /providers/momo/<token>/<kind> (§17). Not a business API operation (no API key, not in /openapi.json):
// authenticated by the secret path token (and Daraja's optional IP allowlist), stored once per body whatever its
// shape, acknowledged at once; the providers pool does the work.
import { createHash, timingSafeEqual } from 'node:crypto';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { AppDeps } from './context.js';
import { AppError } from '../shared/errors.js';
import { inUnit } from '../shared/db/unit-of-work.js';
import { providerJobs } from '../shared/domain/provider-results.js';
import { darajaPayerPhone, isDarajaCallbackKind, redactCallbackBody } from '../shared/providers/daraja/callbacks.js';
import { joinPayerKeys, payerKeys } from '../shared/providers/daraja/msisdn.js';
import { redactMomoBody } from '../shared/providers/momo/momo-results.js';
import type { LiveProviderId } from '../shared/providers/live-rails.js';
import { FailedAuth, clientAddress } from './middleware/failed-auth.js';

export const DARAJA_CALLBACK_BASE = '/providers/daraja';
export const MOMO_CALLBACK_BASE = '/providers/momo';

function sameToken(given: string, expected: string | null): boolean {
  if (!expected) return false;
  const [a, b] = [createHash('sha256').update(given).digest(), createHash('sha256').update(expected).digest()];
  return timingSafeEqual(a, b);
}

/** `::ffff:10.0.0.1` and `10.0.0.1` are one sender. */
const plainIp = (ip: string | undefined) => (ip ?? '').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');

const notFound = () => new AppError('not_found', 'No such route.');

/**
 * The one masking rule for every provider's callback path: the segment after `/providers/<provider>/` is a secret,
 * wherever the path appears (an absolute-form request target, any letter case, before or after a query string).
 */
export function maskCallbackPath(url: string): string {
  return url.replace(/(\/providers\/+[^/?#]+\/+)[^/?#]*/gi, '$1[token]');
}

/** Wrong tokens (or senders) allowed per address per minute on the provider routes; then 429 before comparing. */
const CALLBACK_FAIL_LIMIT = 20;
const CALLBACK_FAIL_WINDOW_SECONDS = 60;

/**
 * One guard for every provider's callback routes: the right token, a known kind and (Daraja) an allowed sender pass;
 * anything else is the 404 of a route that does not exist, and counts against the sender's address, so a token cannot
 * be guessed at speed. The provider itself never fails this check, so its callbacks are never throttled.
 */
function callbackGuard(deps: AppDeps, token: string | null, kinds: (kind: string) => boolean, allowedIps: readonly string[] = []) {
  const allowed = new Set(allowedIps.map(plainIp));
  const failures = new FailedAuth(deps.scripts, `${deps.config.redisPrefix}:cbfail`, CALLBACK_FAIL_LIMIT, CALLBACK_FAIL_WINDOW_SECONDS);
  return async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    const ip = clientAddress(req);
    const wait = await failures.blockedFor(ip);
    if (wait) return next(new AppError('rate_limited', 'Too many requests with a wrong callback path from this address.', undefined, wait));
    if (sameToken(String(req.params.token), token) && kinds(String(req.params.kind)) && (!allowed.size || allowed.has(plainIp(req.ip)))) return next();
    await failures.fail(ip);
    next(notFound());
  };
}

export function darajaCallbacks(deps: AppDeps): Router {
  const router = express.Router();
  const guard = callbackGuard(deps, deps.config.daraja.callbackToken, isDarajaCallbackKind, deps.config.daraja.callbackAllowedIps);
  router.post('/:token/:kind', guard, express.text({ limit: '64kb', type: () => true }), store(deps, 'mpesa_daraja', (kind, body) => ({
    stored: redactCallbackBody(body), payer: joinPayerKeys(payerKeys(deps.config.encryptionKeys, darajaPayerPhone(kind, body) ?? '')),
  }), () => ({ ResultCode: 0, ResultDesc: 'Accepted' })));
  return router;
}

const MOMO_KINDS = new Set(['collection', 'payout']);

/** MTN sends each result once, by PUT or POST, and expects a 200; it does not retry, so the status checks back it up. */
export function momoCallbacks(deps: AppDeps): Router {
  const router = express.Router();
  const guard = callbackGuard(deps, deps.config.momo.callbackToken, (kind) => MOMO_KINDS.has(kind));
  const handle = store(deps, 'mtn_momo', (_kind, body) => ({ stored: redactMomoBody(body), payer: null }), () => ({}));
  for (const method of ['put', 'post'] as const) router[method]('/:token/:kind', guard, express.text({ limit: '64kb', type: () => true }), handle);
  return router;
}

/**
 * Whatever arrives on a valid path is kept for operators and acknowledged, so nothing is lost to a shape we did not
 * expect: the providers pool reads what it can (CONTRACT §14). One row per body (a duplicate is acknowledged alike).
 */
function store(deps: AppDeps, provider: LiveProviderId, keep: (kind: string, body: unknown) => { stored: unknown; payer: string | null }, ack: () => unknown) {
  return async (req: Request, res: Response, next: NextFunction) => {
    const kind = String(req.params.kind);
    const raw = typeof req.body === 'string' ? req.body : '';
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      body = { unparsed: raw };
    }
    try {
      const hash = createHash('sha256').update(`${provider === 'mpesa_daraja' ? '' : `${provider}\n`}${kind}\n${JSON.stringify(body)}`).digest('hex');
      // Kept with its phone numbers redacted (CONTRACT §15); who paid is kept as the payer's digest.
      const { stored: redacted, payer } = keep(kind, body);
      const stored = await inUnit(deps, async (unit) => {
        const rows: { id: string }[] = await unit.em.query(
          `INSERT INTO provider_callbacks (provider, kind, body, body_hash, source_ip, payer_key) VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (body_hash) DO NOTHING RETURNING id`,
          [provider, kind, JSON.stringify(redacted), hash, plainIp(req.ip), payer],
        );
        if (rows[0]) await unit.stage(providerJobs.callback(rows[0].id));
        return rows.length > 0;
      });
      req.state.log.info({ provider, kind, duplicate: !stored }, 'provider callback');
      res.status(200).json(ack());
    } catch (err) {
      next(err);
    }
  };
}
