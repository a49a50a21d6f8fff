// The fault run's own parts that decide what it proves: every lifecycle kind is drawn, and the MTN MoMo relays fault
// and record as the invariants assume (a request run with its answer dropped is still known to have reached MTN; a
// contradicting callback goes first, the true one after it).
import { expect } from 'chai';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { LIFECYCLE_KINDS, makePlan, type Plan } from '../faults/schedule.js';
import { startMomoFaults, type MomoFaults } from '../faults/momo-faults.js';
import { MOMO_CREDENTIALS, startFakeMomo, type FakeMomo } from '../helpers/fake-momo.js';
import { until } from '../helpers/until.js';

const options = { lifecycles: 20, faultMs: 45_000, confirmations: 4 };

describe('fault run: the schedule', () => {
  it('every kind runs in any two consecutive seeds of 20 lifecycles, and once each in a run of as many as there are kinds', () => {
    for (const seed of [0, 1, 3000, 3017, 2 ** 31 - 2]) {
      const seen = new Set([seed, seed + 1].flatMap((s) => makePlan(s, options).lifecycles.map((l) => l.kind)));
      expect([...seen], `seeds ${seed} and ${seed + 1}`).to.have.members([...LIFECYCLE_KINDS]);
      const all = makePlan(seed, { ...options, lifecycles: LIFECYCLE_KINDS.length }).lifecycles.map((l) => l.kind);
      expect(all).to.have.members([...LIFECYCLE_KINDS]);
    }
  });

  it('the MoMo kinds are in every run of 20, with a MoMo outage, and a seed replays its plan', () => {
    for (let seed = 3000; seed < 3020; seed++) {
      const plan = makePlan(seed, options);
      expect(plan.lifecycles.filter((l) => l.kind.startsWith('momo_')).length, `seed ${seed}`).to.be.at.least(4);
      expect(plan.events.filter((e) => e.kind === 'momo_outage')).to.have.length(1);
      expect(makePlan(seed, options)).to.deep.equal(plan);
    }
  });
});

describe('fault run: the MTN MoMo relays', () => {
  let fake: FakeMomo;
  let relays: MomoFaults;
  let plan: Plan;
  const arrived: { method: string; path: string; body: any }[] = [];
  const service = createServer(async (req: IncomingMessage, res) => {
    let text = '';
    for await (const chunk of req) text += chunk;
    arrived.push({ method: req.method!, path: req.url!, body: JSON.parse(text) });
    res.writeHead(200).end();
  });

  before(async () => {
    fake = await startFakeMomo();
    plan = makePlan(1, options);
    // No fault until a test sets one.
    plan.momo = { http5xx: 0, timeout: 0, executedNoAnswer: 0 };
    plan.callbacks = { lost: 0, duplicate: 0, late: 0, outOfOrder: 0, contradicting: 0 };
    relays = await startMomoFaults(fake.url, plan, 500);
    fake.callbackOrigin = relays.callbackUrl;
    await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
    relays.callbackTarget = `http://127.0.0.1:${(service.address() as AddressInfo).port}`;
  });
  after(async () => {
    await relays.close();
    await fake.close();
    service.closeAllConnections();
    await new Promise((resolve) => service.close(resolve));
  });

  const c = MOMO_CREDENTIALS.collection;
  // Asked before any fault is set (a token POST meets the faults too).
  let token = '';
  before(async () => {
    const res = await fetch(`${relays.providerUrl}/collection/token/`, {
      method: 'POST', headers: { Authorization: `Basic ${Buffer.from(`${c.apiUser}:${c.apiKey}`).toString('base64')}`, 'Ocp-Apim-Subscription-Key': c.subscriptionKey },
    });
    expect(res.status).to.equal(200);
    token = (await res.json()).access_token;
  });
  async function requestToPay(referenceId: string, phone: string): Promise<number> {
    const headers = {
      Authorization: `Bearer ${token}`, 'Ocp-Apim-Subscription-Key': c.subscriptionKey, 'X-Target-Environment': 'sandbox', 'X-Reference-Id': referenceId,
      'X-Callback-Url': 'https://rampway.example/providers/momo/tok/collection', 'Content-Type': 'application/json',
    };
    const body = { amount: '15000', currency: 'UGX', externalId: `ext-${referenceId}`, payer: { partyIdType: 'MSISDN', partyId: phone }, payerMessage: 'm', payeeNote: 'n' };
    return fetch(`${relays.providerUrl}/collection/v1_0/requesttopay`, { method: 'POST', headers, body: JSON.stringify(body) }).then((r) => r.status, () => 0);
  }

  it('a request run with its answer dropped is recorded as accepted; one answered 500 by the relay never reached MTN', async () => {
    plan.momo.executedNoAnswer = 1;
    const dropped = randomUUID();
    expect(await requestToPay(dropped, '256701230001')).to.equal(0);
    plan.momo.executedNoAnswer = 0;
    plan.momo.http5xx = 1;
    const refused = randomUUID();
    expect(await requestToPay(refused, '256701234321')).to.equal(500);
    plan.momo.http5xx = 0;
    expect(relays.requests.map((r) => [r.referenceId, r.externalId, r.phone])).to.deep.equal([[dropped, `ext-${dropped}`, '256701230001']]);
    expect(fake.statusOf(dropped)).to.include({ status: 'FAILED', reason: 'APPROVAL_REJECTED' });
    expect(fake.statusOf(refused)).to.equal(null);
    expect(relays.injected).to.include({ executed_no_answer: 1, http5xx: 1 });
    // MTN's callback for the request that ran still goes through (no callback fault drawn).
    await until(() => arrived.some((a) => a.body.externalId === `ext-${dropped}`), { what: 'the callback of the dropped request', timeoutMs: 5000 });
  });

  it('a contradicting callback reaches the service first (FAILED for a success, by PUT on the same path), the true one after; the status GET\'s verdict is recorded', async () => {
    arrived.length = 0;
    plan.callbacks.contradicting = 1;
    const referenceId = randomUUID();
    expect(await requestToPay(referenceId, '256701234322')).to.equal(202);
    await until(() => arrived.length >= 2, { what: 'both callbacks', timeoutMs: 5000 });
    plan.callbacks.contradicting = 0;
    expect(arrived.map((a) => [a.method, a.path, a.body.status])).to.deep.equal([
      ['PUT', '/providers/momo/tok/collection', 'FAILED'], ['PUT', '/providers/momo/tok/collection', 'SUCCESSFUL'],
    ]);
    expect(arrived[0].body).to.include({ externalId: `ext-${referenceId}`, reason: 'APPROVAL_REJECTED' }).and.not.have.property('financialTransactionId');
    expect(arrived[1].body.financialTransactionId).to.equal(fake.statusOf(referenceId)!.financialTransactionId);
    const asked = await fetch(`${relays.providerUrl}/collection/v1_0/requesttopay/${referenceId}`, {
      headers: { Authorization: `Bearer ${token}`, 'Ocp-Apim-Subscription-Key': c.subscriptionKey, 'X-Target-Environment': 'sandbox' },
    });
    expect(asked.status).to.equal(200);
    expect(relays.verdicts.get(referenceId)).to.deep.equal({ status: 'SUCCESSFUL', financialTransactionId: fake.statusOf(referenceId)!.financialTransactionId });
  });
});
