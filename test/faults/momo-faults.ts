// The MTN MoMo stand-in behind the two fault relays of relays.ts. The provider relay faults every call to MTN: the
// token POSTs, requesttopay and transfer (HTTP 5xx, timeouts, run with the answer dropped, outages) and the status
// GETs (HTTP 5xx, timeouts). The callback relay loses, duplicates, delays, reorders and contradicts MTN's callbacks
// (PUT or POST on /providers/momo/...): a contradiction is a FAILED for a request that succeeded, or a forged
// SUCCESSFUL (a made-up financialTransactionId) for one that failed. The relay records each request MTN accepted
// (202: X-Reference-Id -> externalId, the party and the amount) and the verdicts the status GETs carried back; the
// invariants complete those with MTN's own status of each accepted request.
import type { IncomingMessage } from 'node:http';
import { startRelayPair, type RelayPair } from './relays.js';
import type { Plan } from './schedule.js';

export type MomoProduct = 'collection' | 'disbursement';

export interface AcceptedMomo { product: MomoProduct; referenceId: string; externalId: string; phone: string; amount: string; at: number }
export interface MomoVerdict { status: string; financialTransactionId: string | null }

export interface MomoFaults extends RelayPair {
  /** Every requesttopay and transfer MTN accepted (202), whether or not its answer reached the service. */
  requests: AcceptedMomo[];
  /** What MTN's status GETs said of an X-Reference-Id, as the relay passed them (the newest). */
  verdicts: Map<string, MomoVerdict>;
}

const REQUEST = /^\/(collection|disbursement)\/v1_0\/(requesttopay|transfer)$/;
const STATUS = /^\/(collection|disbursement)\/v1_0\/(requesttopay|transfer)\/([^/]+)$/;
const TOKEN = /^\/(collection|disbursement)\/token\/$/;

export async function startMomoFaults(fakeUrl: string, plan: Plan, requestTimeoutMs: number): Promise<MomoFaults> {
  const requests: AcceptedMomo[] = [];
  const verdicts = new Map<string, MomoVerdict>();

  function record(method: string, path: string, headers: IncomingMessage['headers'], request: any, status: number, answer: any): void {
    const made = REQUEST.exec(path);
    if (method === 'POST' && made && status === 202 && request) {
      const party = made[1] === 'collection' ? request.payer : request.payee;
      requests.push({
        product: made[1] as MomoProduct, referenceId: String(headers['x-reference-id']), externalId: String(request.externalId),
        phone: String(party?.partyId ?? ''), amount: String(request.amount), at: Date.now(),
      });
      return;
    }
    const asked = STATUS.exec(path);
    if (method === 'GET' && asked && status === 200 && answer?.status) {
      verdicts.set(decodeURIComponent(asked[3]), { status: String(answer.status), financialTransactionId: answer.financialTransactionId ? String(answer.financialTransactionId) : null });
    }
  }

  /** A callback body saying the opposite of `body` (same externalId, party and amount), or null for a PENDING one. */
  function contradiction(body: any): any {
    if (!body || typeof body !== 'object') return null;
    const { reason: _reason, financialTransactionId: _receipt, ...rest } = body;
    if (body.status === 'SUCCESSFUL') return { ...rest, status: 'FAILED', reason: body.payer ? 'APPROVAL_REJECTED' : 'PAYEE_NOT_FOUND' };
    if (body.status === 'FAILED') return { ...rest, status: 'SUCCESSFUL', financialTransactionId: '7000000001' };
    return null;
  }

  const pair = await startRelayPair(plan.seed, {
    fakeUrl, rates: plan.momo, requestTimeoutMs,
    headers: ['authorization', 'x-reference-id', 'x-callback-url', 'x-target-environment', 'ocp-apim-subscription-key'],
    faultable: (method, path) => (method === 'POST' && (REQUEST.test(path) || TOKEN.test(path)) ? { executes: true } : method === 'GET' && STATUS.test(path) ? { executes: false } : null),
    // A status GET's fate follows the product's sequence of status questions, not the reference asked about.
    fateName: (path) => `momo:${path.replace(STATUS, '/$1/v1_0/$2/{id}')}`,
    outageAnswer: { code: 'SERVICE_UNAVAILABLE', message: 'Service unavailable.' },
    http5xxAnswer: { code: 'INTERNAL_PROCESSING_ERROR', message: 'An internal error occurred while processing.' },
    record,
  }, { rates: plan.callbacks, accepted: {}, learn: () => undefined, contradiction });
  return Object.assign(pair, { requests, verdicts });
}
