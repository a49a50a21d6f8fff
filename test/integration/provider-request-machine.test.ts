import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { getDs } from '../helpers/shared.js';
import { makeBusiness } from '../helpers/factories.js';
import { captureLogs } from '../helpers/log-capture.js';
import { ProviderRequests, requestRow, settleRequest } from '../../shared/providers/provider-requests.js';
import type { CollectRequest } from '../../shared/providers/provider.js';
import { decideSuccess } from '../../shared/kernel/provider-records.js';
import { moveRecord } from '../../shared/domain/transition.js';
import { PROVIDER_REQUEST_MACHINE } from '../../shared/domain/machines.js';

// A provider request's status moves only along PROVIDER_REQUEST_MACHINE, against the real table: its writers
// (ProviderRequests, the late success) decide by shared/kernel/provider-records.ts and write by compare-and-set.
describe('provider request machine (provider_requests.status)', () => {
  let ds: DataSource;
  let requests: ProviderRequests;
  let businessId: string;
  const logs = captureLogs('debug');

  const claimed = async (): Promise<string> => {
    const req: CollectRequest = { reference: randomUUID(), scope: { businessId, environment: 'live' }, currency: 'KES', amount: '250.00', phone_number: '254708374149', mobile_network: 'safaricom' };
    expect(await requests.claim('collection', req, { currency: 'KES', amount: '250.00' })).to.equal(null);
    return req.reference;
  };
  const row = async (reference: string) => (await requestRow(ds, { environment: 'live', kind: 'collection', reference }))!;

  before(async () => {
    ds = await getDs();
    businessId = (await makeBusiness()).businessId;
    requests = new ProviderRequests(ds, logs.log, 'test');
  });

  it('a request is claimed as sending; its answer is stored in typed columns', async () => {
    const reference = await claimed();
    expect(await row(reference)).to.include({ status: 'sending', provider_reference: null, ended: false, sends: 0 });
    expect(await requests.markSending('collection', reference, undefined, 0)).to.equal(true);
    const failure = { code: 'collection_declined', message: 'The payer cancelled.' };
    expect(await requests.store('collection', reference, { status: 'declined', provider_reference: 'ws_CO_1', failure })).to.deep.equal({ status: 'declined', provider_reference: 'ws_CO_1', failure });
    expect(await row(reference)).to.deep.include({ status: 'declined', provider_reference: 'ws_CO_1', receipt: null, failure, ended: false, sends: 1 });
  });

  it('a final answer stored first is kept: a later pending answer leaves it final, and answers it', async () => {
    const reference = await claimed();
    await requests.markSending('collection', reference);
    await requests.store('collection', reference, { status: 'succeeded', provider_reference: 'ws_CO_2', receipt: 'RKT2' });
    expect(await requests.store('collection', reference, { status: 'pending', provider_reference: 'ws_CO_2' })).to.deep.equal({ status: 'succeeded', provider_reference: 'ws_CO_2', receipt: 'RKT2' });
    expect(await row(reference)).to.include({ status: 'succeeded', receipt: 'RKT2' });
  });

  it('a final answer that is not ended is never sent again; an ended one is (and forgets it ended)', async () => {
    const reference = await claimed();
    await requests.markSending('collection', reference);
    await requests.store('collection', reference, { status: 'rejected', provider_reference: 'u1', failure: { code: 'payout_rejected', message: 'No.' } });
    expect(await requests.markSending('collection', reference, 'u2')).to.equal(false);
    expect(await row(reference)).to.include({ status: 'rejected', provider_reference: 'u1', sends: 1 });

    const ended = await claimed();
    await requests.markSending('collection', ended);
    await requests.store('collection', ended, { status: 'declined', provider_reference: 'u3', ended: true, failure: { code: 'collection_failed', message: 'Ended.' } });
    expect(await requests.markSending('collection', ended, 'u4')).to.equal(true);
    expect(await row(ended)).to.include({ status: 'sending', provider_reference: 'u4', failure: null, ended: false, sends: 2, conversation_id: 'u4' });
  });

  it('the machine holds in the UPDATE itself: a move it forbids (or a guard refuses) changes nothing, whoever asks', async () => {
    const reference = await claimed();
    await requests.markSending('collection', reference);
    await requests.store('collection', reference, { status: 'declined', provider_reference: 'u5' });
    const { id } = await row(reference);
    // Not ended: the guard refuses a new send even to a caller that skipped the decision.
    expect(await moveRecord(ds, PROVIDER_REQUEST_MACHINE, { id, expected: 'declined', to: 'sending' })).to.equal(null);
    // No move leads from a final answer to another answer but a success.
    expect(await moveRecord(ds, PROVIDER_REQUEST_MACHINE, { id, expected: 'declined', to: 'pending' })).to.equal(null);
    // A compare-and-set on a column it read that changed since: nothing.
    expect(await moveRecord(ds, PROVIDER_REQUEST_MACHINE, { id, expected: 'declined', to: 'succeeded', unchanged: { sends: 7 } })).to.equal(null);
    expect((await row(reference)).status).to.equal('declined');
  });

  it('a collection\'s late success is recorded over a decline, once; the sends read decide who sends', async () => {
    const reference = await claimed();
    await requests.markSending('collection', reference);
    await requests.store('collection', reference, { status: 'declined', provider_reference: 'ws_CO_6', failure: { code: 'collection_timeout', message: 'Late.' } });
    const key = { environment: 'live' as const, kind: 'collection' as const, reference };
    const success = { status: 'succeeded' as const, provider_reference: 'ws_CO_6', receipt: 'RKT6' };
    expect((await settleRequest(ds, key, (r) => decideSuccess(r, success)))?.change.kind).to.equal('move');
    expect(await row(reference)).to.deep.include({ status: 'succeeded', receipt: 'RKT6', failure: null });
    expect((await settleRequest(ds, key, (r) => decideSuccess(r, success)))?.change.kind).to.equal('keep');

    const raced = await claimed();
    expect(await requests.markSending('collection', raced, undefined, 0)).to.equal(true);
    expect(await requests.markSending('collection', raced, undefined, 0)).to.equal(false);
    expect((await row(raced)).sends).to.equal(1);
  });

  it('a payout refused for good goes again over its refusal only as an on-ramp\'s fiat refund: never one of no on-ramp, whoever asks', async () => {
    // A payout whose reference names no on-ramp (an off-ramp's: its USDC went back when M-Pesa refused it).
    const req = { reference: randomUUID(), scope: { businessId, environment: 'live' as const }, currency: 'KES', amount: '250.00', payment_method: 'mobile_money' as const, account_holder_name: 'P', details: {} };
    expect(await requests.claim('payout', req, { currency: 'KES', amount: '250.00' })).to.equal(null);
    await requests.markSending('payout', req.reference);
    await requests.store('payout', req.reference, { status: 'rejected', provider_reference: 'AG_1', failure: { code: 'invalid_receiver', message: 'No.' } }, { answer: 'failed_permanent' });
    // Even a caller that says it may send over a refusal: the table's guard refuses every try (it never leaves).
    expect(await requests.markSending('payout', req.reference, undefined, 1, true).then(String, (err: Error) => err.message)).to.match(/kept changing/);
    const [{ id, status, sends }] = await ds.query(`SELECT id, status, sends FROM provider_requests WHERE environment = 'live' AND kind = 'payout' AND reference = $1`, [req.reference]);
    expect([status, sends]).to.deep.equal(['rejected', 1]);
    expect(await moveRecord(ds, PROVIDER_REQUEST_MACHINE, { id, expected: 'rejected', to: 'sending' })).to.equal(null);
  });
});
