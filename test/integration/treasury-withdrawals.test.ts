import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey, writeHeaders } from '../helpers/factories.js';
import { getDs } from '../helpers/shared.js';
import { BASE, createCustomer, externalWallet } from '../helpers/wallets.js';
import { balance, expectLedgerSound, fundTreasury as fundTreasuryOf, history, schemaValidator, verifiedWallet } from '../helpers/ramps.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { until } from '../helpers/until.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { postEntry } from '../../shared/domain/ledger.js';
import { createWithdrawal } from '../../shared/domain/treasury-withdrawals.js';
import { EVENT_TYPES } from '../../shared/domain/machines.js';
import { POOLS } from '../../shared/queues/registry.js';
import type { Queues } from '../../shared/queues/producer.js';
import { sweepJob } from '../../workers/sweeper/sweep.job.js';
import { toMinor, USDC_SCALE } from '../../shared/domain/money.js';

// Treasury withdrawals in sandbox (CONTRACT section 14): to a verified external wallet of the business, debited from
// the treasury at once, completed into the wallet's simulated balance with a simulated hash, or failed with the amount
// back in the treasury; refusals change nothing.

const WITHDRAWALS = `${BASE}/treasury/withdrawals`;

describe('treasury withdrawals, in sandbox', function () {
  this.timeout(60_000);
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;
  let businessId: string;
  let validate: (name: string, body: unknown) => void;

  before(async () => {
    // Loopback webhook endpoints allowed: one test subscribes to withdrawal events.
    api = await startApi({ env: { WEBHOOKS_ALLOW_LOOPBACK: 'true' } });
    pools = await startPools(['settlement', 'pricing']);
    validate = await schemaValidator(api);
  });
  beforeEach(async () => {
    const biz = await makeBusiness();
    [key, businessId] = [biz.sandboxKey, biz.businessId];
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });
  afterEach(expectLedgerSound);

  const fundTreasury = (amount: string) => fundTreasuryOf(api, businessId, amount);
  const available = async (k = key) => (await api.http.get(`${BASE}/treasury/balance`).set(bearer(k))).body.available as string;
  const withdraw = (body: Record<string, unknown>, headers = writeHeaders(key)) => api.http.post(WITHDRAWALS).set(headers).send(body);
  const get = async (id: string) => (await api.http.get(`${WITHDRAWALS}/${id}`).set(bearer(key))).body;
  const untilWithdrawal = async (id: string, statuses: string[]) => {
    let last: Record<string, any> = {};
    return until(async () => {
      last = await get(id);
      return statuses.includes(last.status) && last;
    }, { what: `withdrawal ${id} reaching ${statuses.join('/')}`, describe: () => last });
  };
  const eventsOf = async (id: string) => {
    const rows: { type: string }[] = await (await getDs()).query(`SELECT type FROM events WHERE business_id = $1 AND data->>'id' = $2 ORDER BY seq`, [businessId, id]);
    return rows.map((r) => r.type);
  };
  const rowsOf = async () => (await getDs()).query(`SELECT id FROM treasury_withdrawals WHERE business_id = $1`, [businessId]);

  it('sends treasury USDC to a verified wallet: debited at once, completed into its simulated balance with a hash, announced', async () => {
    await fundTreasury('100');
    const wallet = await verifiedWallet(api, key);
    const res = await withdraw({ wallet_id: wallet.id, amount: '40.5', external_reference: 'payday-11' });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    validate('TreasuryWithdrawal', res.body);
    expect(res.body).to.include({ wallet_id: wallet.id, chain: 'base', amount: '40.500000', status: 'pending', transaction_hash: null, external_reference: 'payday-11', failure: null });
    expect(await available()).to.equal('59.500000');
    const done = await untilWithdrawal(res.body.id, ['completed', 'failed']);
    expect(done.status).to.equal('completed');
    expect(done.transaction_hash).to.match(/^0x[0-9a-f]{64}$/);
    validate('TreasuryWithdrawal', done);
    expect(await balance(api, key, wallet.id)).to.equal('40.500000');
    expect(await available()).to.equal('59.500000');
    expect(await history(res.body.id)).to.deep.equal(['pending', 'completed']);
    expect(await eventsOf(res.body.id)).to.deep.equal(['treasury_withdrawal.pending', 'treasury_withdrawal.completed']);
    // One entry for the debit, one for the completion.
    const kinds = (await api.http.get(`${BASE}/treasury/ledger`).set(bearer(key))).body.data.map((e: { kind: string }) => e.kind);
    expect(kinds.filter((k: string) => k.startsWith('treasury_withdrawal'))).to.deep.equal(['treasury_withdrawal_completed', 'treasury_withdrawal_pending']);
    // Listed, newest first, filtered by status; another business sees none of it.
    const list = (await api.http.get(`${WITHDRAWALS}?status=completed`).set(bearer(key))).body;
    validate('TreasuryWithdrawalList', list);
    expect(list.data.map((w: { id: string }) => w.id)).to.deep.equal([res.body.id]);
    expect((await api.http.get(`${WITHDRAWALS}?status=pending`).set(bearer(key))).body.data).to.deep.equal([]);
    const other = await makeBusiness();
    expect((await api.http.get(`${WITHDRAWALS}/${res.body.id}`).set(bearer(other.sandboxKey))).status).to.equal(404);
    expect((await api.http.get(WITHDRAWALS).set(bearer(other.sandboxKey))).body.data).to.deep.equal([]);
  });

  it('refuses an unverified, managed, unknown or another business\'s wallet, and more than the treasury holds; nothing changes', async () => {
    await fundTreasury('10');
    const unverified = (await externalWallet(api, key)).wallet;
    const managed = (await createCustomer(api, key)).wallet;
    const verified = await verifiedWallet(api, key);
    const other = await makeBusiness();
    const foreign = await verifiedWallet(api, other.sandboxKey);
    const refused = async (body: Record<string, unknown>, status: number, code: string) => {
      const res = await withdraw(body);
      expect(res.status, JSON.stringify(res.body)).to.equal(status);
      expect(res.body.error.code).to.equal(code);
      return res.body.error;
    };
    expect((await refused({ wallet_id: unverified.id, amount: '1' }, 422, 'wallet_not_verified')).details).to.deep.equal({ wallet_id: unverified.id });
    await refused({ wallet_id: managed.id, amount: '1' }, 422, 'wallet_not_verified');
    await refused({ wallet_id: foreign.id, amount: '1' }, 404, 'not_found');
    await refused({ wallet_id: randomUUID(), amount: '1' }, 404, 'not_found');
    expect((await refused({ wallet_id: verified.id, amount: '10.000001' }, 409, 'insufficient_funds')).details).to.deep.equal({ available: '10.000000', required: '10.000001' });
    await refused({ wallet_id: verified.id, amount: '0' }, 400, 'invalid_request');
    await refused({ wallet_id: verified.id, amount: '1.0000001' }, 400, 'invalid_request');
    await refused({ wallet_id: verified.id, amount: '1', chain: 'polygon' }, 400, 'invalid_request');
    await refused({ wallet_id: verified.id, amount: '1', to_address: verified.address }, 400, 'invalid_request');
    expect(await available()).to.equal('10.000000');
    expect(await rowsOf()).to.deep.equal([]);
    expect(await (await getDs()).query(`SELECT 1 FROM events WHERE business_id = $1 AND type LIKE 'treasury_withdrawal.%'`, [businessId])).to.deep.equal([]);
    // The whole balance can go.
    expect((await withdraw({ wallet_id: verified.id, amount: '10' })).status).to.equal(201);
    expect(await available()).to.equal('0.000000');
  });

  it('a replay with the same Idempotency-Key answers the same withdrawal and debits once', async () => {
    await fundTreasury('50');
    const wallet = await verifiedWallet(api, key);
    const headers = writeHeaders(key);
    const first = await withdraw({ wallet_id: wallet.id, amount: '20' }, headers);
    const again = await withdraw({ wallet_id: wallet.id, amount: '20' }, headers);
    expect(first.status).to.equal(201);
    expect(again.status).to.equal(201);
    expect(again.headers['idempotent-replayed']).to.equal('true');
    expect(again.body.id).to.equal(first.body.id);
    expect((await withdraw({ wallet_id: wallet.id, amount: '21' }, headers)).status).to.equal(422);
    await untilWithdrawal(first.body.id, ['completed']);
    expect(await rowsOf()).to.have.length(1);
    expect(await available()).to.equal('30.000000');
    expect(await balance(api, key, wallet.id)).to.equal('20.000000');
  });

  it('a withdrawal whose send job was lost is sent by the sweeper; one whose wallet was archived first fails and the amount returns', async () => {
    await fundTreasury('30');
    const scope = { businessId, environment: 'sandbox' as const };
    // Accepted, and its send job accepted by a Redis that then lost it.
    const lostJobs = Object.fromEntries(POOLS.map((p) => [p, { add: async () => undefined }])) as unknown as Queues;
    const create = async (walletId: string) => inUnit({ ...api.deps, queues: lostJobs }, (unit) => createWithdrawal(unit, api.deps.config, scope, randomUUID(), { wallet_id: walletId, amount: '10' }));
    const kept = await verifiedWallet(api, key);
    const archived = await verifiedWallet(api, key);
    const sent = await create(kept.id);
    const failing = await create(archived.id);
    expect(await available()).to.equal('10.000000');
    expect((await api.http.delete(`${BASE}/wallets/${archived.id}`).set(writeHeaders(key))).status).to.equal(200);
    await (await getDs()).query(`UPDATE treasury_withdrawals SET updated_at = now() - interval '5 minutes' WHERE business_id = $1`, [businessId]);
    const counts = (await sweepJob.process({ data: {} } as never, pools.deps)) as Record<string, number>;
    expect(counts['treasury withdrawals still pending']).to.be.at.least(2);
    expect((await untilWithdrawal(sent.id, ['completed', 'failed'])).status).to.equal('completed');
    const failed = await untilWithdrawal(failing.id, ['completed', 'failed']);
    expect(failed).to.include({ status: 'failed', transaction_hash: null });
    expect(failed.failure.code).to.equal('wallet_archived');
    expect(await eventsOf(failing.id)).to.deep.equal(['treasury_withdrawal.pending', 'treasury_withdrawal.failed']);
    expect(await available()).to.equal('20.000000');
    expect(await balance(api, key, kept.id)).to.equal('10.000000');
  });

  it('needs treasury:write, which create-business keys hold; webhook endpoints may ask for its events', async () => {
    const readOnly = await makeKey(businessId, { scopes: ['treasury:read'] });
    const denied = await withdraw({ wallet_id: randomUUID(), amount: '1' }, writeHeaders(readOnly.key));
    expect(denied.status).to.equal(403);
    expect(denied.body.error.details).to.deep.equal({ required_scope: 'treasury:write' });
    expect((await api.http.get(WITHDRAWALS).set(bearer(readOnly.key))).status).to.equal(200);
    const created = await makeBusiness();
    expect(created.keys.every((k) => k.scopes.includes('treasury:write'))).to.equal(true);
    expect(EVENT_TYPES).to.include.members(['treasury_withdrawal.pending', 'treasury_withdrawal.completed', 'treasury_withdrawal.failed']);
    const endpoint = await api.http.post(`${BASE}/webhook-endpoints`).set(writeHeaders(key))
      .send({ url: 'http://127.0.0.1:9/hooks', events: ['treasury_withdrawal.*', 'treasury_withdrawal.completed'] });
    expect(endpoint.status, JSON.stringify(endpoint.body)).to.equal(201);
  });
});
