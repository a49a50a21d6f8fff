// Our own HTTP server that plays MTN's MoMo Open API, written from MTN's published documentation and developer
// community pages (read 2026-11-25 with the search tool), never from our parser:
//   - Tokens: `POST /collection/token/` and `POST /disbursement/token/` with Basic (api user : api key) and the product's
//     `Ocp-Apim-Subscription-Key`, answering `{ access_token, token_type: "access_token", expires_in: 3600 }`.
//   - `POST /collection/v1_0/requesttopay` and `POST /disbursement/v1_0/transfer`: headers Authorization (Bearer),
//     X-Reference-Id (a UUID v4, the resource id), X-Target-Environment, X-Callback-Url, Ocp-Apim-Subscription-Key;
//     body `{ amount, currency, externalId, payer | payee: { partyIdType: "MSISDN", partyId }, payerMessage, payeeNote }`;
//     answered `202 Accepted` with no body. A reference id used before: `409 { code: "RESOURCE_ALREADY_EXIST" }`.
//   - Status: `GET .../requesttopay/{referenceId}` and `GET .../transfer/{referenceId}`, 200 with
//     `{ amount, currency, financialTransactionId, externalId, payer | payee, payerMessage, payeeNote, status, reason? }`
//     (status PENDING, SUCCESSFUL or FAILED; reason e.g. APPROVAL_REJECTED, PAYER_NOT_FOUND, PAYEE_NOT_FOUND, EXPIRED,
//     NOT_ENOUGH_FUNDS, INTERNAL_PROCESSING_ERROR); unknown id: `404 { code: "RESOURCE_NOT_FOUND" }`.
//   - Callbacks: the final result is sent once (no retry) to the X-Callback-Url by PUT (or POST), with the status body.
// The last four digits of the payer or payee pick the scenario, so a test reads it from its data:
//   collections: 0001 rejected by the payer (APPROVAL_REJECTED), 0002 PAYER_NOT_FOUND, 0037 EXPIRED, 0099 callback lost,
//                0022 callback sent twice, 0044 PENDING for `pendingMs` with its callback lost, 0050 run and answered 500;
//   payouts:     0002 PAYEE_NOT_FOUND, 0003 HTTP 503 on the first request (not run), 0006 run and answered 500,
//                0008 run, its answer held `holdMs` (our request times out), the first status GET 404 (not visible yet), no callback,
//                0009 the first request of a payout FAILED INTERNAL_PROCESSING_ERROR (temporary), later ones paid,
//                0011 FAILED NOT_ENOUGH_FUNDS every time, 0044 PENDING for `pendingMs` with its callback lost,
//                0099 callback lost, 0022 callback sent twice.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';

type Product = 'collection' | 'disbursement';

export interface MomoLogged {
  method: string;
  path: string;
  referenceId: string | null;
  callbackUrl: string | null;
  targetEnvironment: string | null;
  body: Record<string, any>;
}

interface Resource {
  product: Product;
  referenceId: string;
  body: Record<string, any>;
  status: 'PENDING' | 'SUCCESSFUL' | 'FAILED';
  reason?: string;
  financialTransactionId: string;
  callbackUrl: string | null;
  pendingUntil: number;
}

export interface FakeMomo {
  url: string;
  log: MomoLogged[];
  /** Callbacks sent and our API's HTTP answer. */
  callbacks: { url: string; method: string; status: number; body: unknown }[];
  tokenRequests: Record<Product, number>;
  callbackOrigin: string;
  callbackDelayMs: number;
  callbackMethod: 'PUT' | 'POST';
  holdMs: number;
  pendingMs: number;
  /** Transfers MTN ran (money moved), per externalId: more than 1 is a double payment. */
  executions: Map<string, number>;
  /** The requests (POSTs) for an externalId, oldest first. */
  requestsFor(externalId: string): MomoLogged[];
  /** The status body MTN answers for a reference id, or null. */
  statusOf(referenceId: string): Record<string, any> | null;
  /** Sends a callback body (altered by a test: a late, duplicated or contradicting one) where MTN would send it. */
  sendCallback(referenceId: string, body: Record<string, any>): Promise<number>;
  /**
   * What MTN decides for the next requests to or from a party (partyId, digits), one each, before its scenario suffix:
   * 'SUCCESSFUL' or a reason from MOMO_REASONS (any string: an unpublished one too).
   */
  answers: Map<string, string[]>;
  /** MTN changes its mind about a request it had FAILED: SUCCESSFUL from now on, and the callback is sent. */
  payLate(referenceId: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * MTN's published failure reasons (momodeveloper.mtn.com "Common Error Codes" and the API's ErrorReason enum, read
 * 2026-11-28 with the search tool), each a FAILED status's `reason` for a request to pay or a transfer.
 */
export const MOMO_REASONS: readonly string[] = [
  'INTERNAL_PROCESSING_ERROR', 'APPROVAL_REJECTED', 'EXPIRED', 'ONGOING', 'PAYER_DELAYED', 'PAYER_NOT_FOUND', 'PAYEE_NOT_ALLOWED_TO_RECEIVE',
  'NOT_ALLOWED', 'NOT_ALLOWED_TARGET_ENVIRONMENT', 'INVALID_CALLBACK_URL_HOST', 'INVALID_CURRENCY', 'SERVICE_UNAVAILABLE',
  'COULD_NOT_PERFORM_TRANSACTION', 'NOT_ENOUGH_FUNDS', 'PAYEE_NOT_FOUND', 'PAYER_LIMIT_REACHED', 'PAYEE_DELAYED',
  'PAYMENT_NOT_APPROVED', 'TRANSACTION_CANCELED', 'RESOURCE_NOT_FOUND',
];

export const MOMO_CREDENTIALS = {
  collection: { subscriptionKey: 'fake-coll-sub-key-5a1e', apiUser: 'b6a1f3a0-1c2d-4e5f-8a9b-0c1d2e3f4a5b', apiKey: 'fake-coll-api-key-77d2' },
  disbursement: { subscriptionKey: 'fake-disb-sub-key-9c3f', apiUser: 'c7b2e4b1-2d3e-4f60-9bac-1d2e3f4a5b6c', apiKey: 'fake-disb-api-key-21e8' },
};

/** The MOMO_ variables that point Rampway at a fake. */
export function momoEnv(fake: FakeMomo, publicBaseUrl: string, token: string, currencies = 'UGX'): Record<string, string> {
  const c = MOMO_CREDENTIALS;
  return {
    MOMO_BASE_URL: fake.url, MOMO_TARGET_ENVIRONMENT: 'sandbox', MOMO_CURRENCIES: currencies,
    MOMO_COLLECTION_SUBSCRIPTION_KEY: c.collection.subscriptionKey, MOMO_COLLECTION_API_USER: c.collection.apiUser, MOMO_COLLECTION_API_KEY: c.collection.apiKey,
    MOMO_DISBURSEMENT_SUBSCRIPTION_KEY: c.disbursement.subscriptionKey, MOMO_DISBURSEMENT_API_USER: c.disbursement.apiUser, MOMO_DISBURSEMENT_API_KEY: c.disbursement.apiKey,
    MOMO_CALLBACK_TOKEN: token, PUBLIC_BASE_URL: publicBaseUrl,
  };
}

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
const last4 = (s: unknown) => String(s ?? '').slice(-4);
const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PATHS: Record<Product, string> = { collection: '/collection/v1_0/requesttopay', disbursement: '/disbursement/v1_0/transfer' };

async function readText(req: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of req) text += chunk;
  return text;
}

export async function startFakeMomo(): Promise<FakeMomo> {
  const issued = new Map<string, { product: Product; until: number }>();
  const resources = new Map<string, Resource>();
  const once = new Set<string>();
  const fake: FakeMomo = {
    url: '', log: [], callbacks: [], tokenRequests: { collection: 0, disbursement: 0 }, callbackOrigin: '', callbackDelayMs: 30, callbackMethod: 'PUT',
    holdMs: 0, pendingMs: 600, executions: new Map(), answers: new Map(),
    requestsFor: (externalId) => fake.log.filter((r) => r.method === 'POST' && r.body.externalId === externalId),
    statusOf: (referenceId) => (resources.has(referenceId) ? statusBody(resources.get(referenceId)!) : null),
    sendCallback: async (referenceId, body) => {
      const r = resources.get(referenceId)!;
      return deliver(r.callbackUrl!, body);
    },
    payLate: async (referenceId) => {
      const r = resources.get(referenceId)!;
      Object.assign(r, { status: 'SUCCESSFUL', reason: undefined });
      if (r.callbackUrl) await deliver(r.callbackUrl, statusBody(r));
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };

  function statusBody(r: Resource): Record<string, any> {
    const paid = r.status === 'SUCCESSFUL' && Date.now() >= r.pendingUntil;
    const status = Date.now() < r.pendingUntil ? 'PENDING' : r.status;
    const party = r.product === 'collection' ? { payer: r.body.payer } : { payee: r.body.payee };
    return {
      amount: r.body.amount, currency: r.body.currency, ...(paid ? { financialTransactionId: r.financialTransactionId } : {}), externalId: r.body.externalId,
      ...party, payerMessage: r.body.payerMessage, payeeNote: r.body.payeeNote, status, ...(status === 'FAILED' ? { reason: r.reason } : {}),
    };
  }

  async function deliver(url: string, body: unknown): Promise<number> {
    const target = new URL(url);
    const to = `${fake.callbackOrigin || target.origin}${target.pathname}`;
    const res = await fetch(to, { method: fake.callbackMethod, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }).catch(() => null);
    fake.callbacks.push({ url: to, method: fake.callbackMethod, status: res?.status ?? 0, body });
    return res?.status ?? 0;
  }

  /** What MTN decides for a new request (the scenario), run at once: money moves on SUCCESSFUL. */
  function decide(product: Product, body: Record<string, any>): { status: Resource['status']; reason?: string } {
    const party = product === 'collection' ? body.payer?.partyId : body.payee?.partyId;
    const chosen = fake.answers.get(String(party))?.shift();
    if (chosen) return chosen === 'SUCCESSFUL' ? { status: 'SUCCESSFUL' } : { status: 'FAILED', reason: chosen };
    const suffix = last4(party);
    if (product === 'collection') {
      const failed: Record<string, string> = { '0001': 'APPROVAL_REJECTED', '0002': 'PAYER_NOT_FOUND', '0037': 'EXPIRED' };
      return failed[suffix] ? { status: 'FAILED', reason: failed[suffix] } : { status: 'SUCCESSFUL' };
    }
    if (suffix === '0002') return { status: 'FAILED', reason: 'PAYEE_NOT_FOUND' };
    if (suffix === '0011') return { status: 'FAILED', reason: 'NOT_ENOUGH_FUNDS' };
    if (suffix === '0009' && !once.has(`temp-${body.externalId}`)) {
      once.add(`temp-${body.externalId}`);
      return { status: 'FAILED', reason: 'INTERNAL_PROCESSING_ERROR' };
    }
    return { status: 'SUCCESSFUL' };
  }

  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url!, 'http://fake');
    const send = (status: number, body?: unknown) => {
      if (body === undefined) return res.writeHead(status).end();
      res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
    };
    const header = (name: string) => (req.headers[name.toLowerCase()] as string | undefined) ?? null;
    const tokenPath = /^\/(collection|disbursement)\/token\/$/.exec(url.pathname);
    if (req.method === 'POST' && tokenPath) {
      const product = tokenPath[1] as Product;
      fake.tokenRequests[product]++;
      const c = MOMO_CREDENTIALS[product];
      const basic = `Basic ${Buffer.from(`${c.apiUser}:${c.apiKey}`).toString('base64')}`;
      if (header('Ocp-Apim-Subscription-Key') !== c.subscriptionKey) return send(401, { statusCode: 401, message: 'Access denied due to invalid subscription key. Make sure to provide a valid key for an active subscription.' });
      if (header('Authorization') !== basic) return send(401, { error: 'login_failed' });
      const token = `fake-momo-${product}-${randomUUID()}`;
      issued.set(token, { product, until: Date.now() + 3600_000 });
      return send(200, { access_token: token, token_type: 'access_token', expires_in: 3600 });
    }
    const product: Product | null = url.pathname.startsWith('/collection/') ? 'collection' : url.pathname.startsWith('/disbursement/') ? 'disbursement' : null;
    const token = issued.get((header('Authorization') ?? '').replace(/^Bearer /, ''));
    if (!product || header('Ocp-Apim-Subscription-Key') !== MOMO_CREDENTIALS[product].subscriptionKey) return send(401, { statusCode: 401, message: 'Access denied due to invalid subscription key.' });
    if (!token || token.product !== product || token.until < Date.now()) return send(401, { statusCode: 401, message: 'Access denied due to invalid or expired access token.' });
    if (header('X-Target-Environment') !== 'sandbox') return send(400, { code: 'NOT_ALLOWED_TARGET_ENVIRONMENT', message: 'Access to target environment is forbidden.' });
    const text = await readText(req);
    let body: Record<string, any> = {};
    try {
      body = JSON.parse(text || '{}');
    } catch {
      return send(400, { code: 'INVALID_REQUEST', message: 'Request body is not JSON.' });
    }
    fake.log.push({ method: req.method!, path: url.pathname, referenceId: header('X-Reference-Id'), callbackUrl: header('X-Callback-Url'), targetEnvironment: header('X-Target-Environment'), body });

    if (req.method === 'POST' && url.pathname === PATHS[product]) {
      const referenceId = header('X-Reference-Id') ?? '';
      if (!UUID_V4.test(referenceId)) return send(400, { code: 'INVALID_REFERENCE_ID', message: 'X-Reference-Id must be a UUID version 4.' });
      if (resources.has(referenceId)) return send(409, { code: 'RESOURCE_ALREADY_EXIST', message: 'Duplicated reference id. Creation of resource failed.' });
      const party = product === 'collection' ? body.payer : body.payee;
      if (typeof body.amount !== 'string' || !/^\d+(\.\d+)?$/.test(body.amount) || typeof body.currency !== 'string' || party?.partyIdType !== 'MSISDN' || !/^\d+$/.test(String(party?.partyId))) {
        return send(400, { code: 'INVALID_REQUEST', message: 'Request does not follow the specification.' });
      }
      const suffix = last4(party.partyId);
      if (product === 'disbursement' && suffix === '0003' && !once.has(`503-${body.externalId}`)) {
        once.add(`503-${body.externalId}`);
        return send(503, { code: 'SERVICE_UNAVAILABLE', message: 'Service unavailable.' });
      }
      const decided = decide(product, body);
      const r: Resource = {
        product, referenceId, body, ...decided, financialTransactionId: String(Math.floor(1e9 + Math.random() * 9e9)), callbackUrl: header('X-Callback-Url'),
        pendingUntil: suffix === '0044' ? Date.now() + fake.pendingMs : 0,
      };
      resources.set(referenceId, r);
      if (product === 'disbursement' && r.status === 'SUCCESSFUL') fake.executions.set(body.externalId, (fake.executions.get(body.externalId) ?? 0) + 1);
      if (r.callbackUrl && !['0099', '0044', '0008'].includes(suffix)) {
        void delay(fake.callbackDelayMs).then(async () => {
          await deliver(r.callbackUrl!, statusBody(r));
          if (suffix === '0022') await deliver(r.callbackUrl!, statusBody(r));
        });
      }
      // Run, and the answer lost on the way back.
      if ((suffix === '0050' && product === 'collection') || (suffix === '0006' && product === 'disbursement')) {
        if (!once.has(`500-${body.externalId}`)) {
          once.add(`500-${body.externalId}`);
          return send(500, { code: 'INTERNAL_PROCESSING_ERROR', message: 'An internal error occurred while processing.' });
        }
      }
      if (suffix === '0008' && fake.holdMs && !once.has(`hold-${body.externalId}`)) {
        once.add(`hold-${body.externalId}`);
        once.add(`lag-${referenceId}`);
        await delay(fake.holdMs);
      }
      return send(202);
    }
    const status = new RegExp(`^${PATHS[product]}/([^/]+)$`).exec(url.pathname);
    if (req.method === 'GET' && status) {
      const referenceId = decodeURIComponent(status[1]);
      const r = resources.get(referenceId);
      if (once.has(`lag-${referenceId}`)) {
        once.delete(`lag-${referenceId}`);
        return send(404, { code: 'RESOURCE_NOT_FOUND', message: 'Requested resource was not found.' });
      }
      if (!r) return send(404, { code: 'RESOURCE_NOT_FOUND', message: 'Requested resource was not found.' });
      return send(200, statusBody(r));
    }
    send(404, { code: 'RESOURCE_NOT_FOUND', message: 'Requested resource was not found.' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}
