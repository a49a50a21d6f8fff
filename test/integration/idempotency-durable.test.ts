// CONTRACT §3, "The record is durable": Redis may forget an idempotency key (a restart without persistence, a
// failover that drops its latest writes); PostgreSQL must not. After such a loss a retry with the same key and body
// replays the first answer byte for byte, with Idempotent-Replayed: true, and writes nothing; another body under the
// key is 422 idempotency_key_reused. Redis is "lost" here by deleting this file's own idempotency keys.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { Response } from 'supertest';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { makeBusiness, makeKey, writeHeaders } from '../helpers/factories.js';
import { deleteKeys, getDs, testRedis } from '../helpers/shared.js';
import { BASE, createCustomer, newAccount } from '../helpers/wallets.js';
import { fund, fundTreasury, kesBeneficiary, verifiedWallet } from '../helpers/ramps.js';
import { drainQueues, startPools, type RunningPools } from '../helpers/workers.js';
import { until } from '../helpers/until.js';
import { getConfig } from '../../shared/config.js';
import { expireSettlementJob } from '../../workers/settlement/expire-settlement.job.js';
import { purgeIdempotencyJob } from '../../workers/outbox/cleanup-outbox.job.js';
import { recordScopeKey } from '../../shared/db/idempotency-records.js';

interface Biz { businessId: string; key: string }
interface Prepared { path: string; body: Record<string, unknown>; other: Record<string, unknown> }
interface Case {
  name: string;
  /** Fresh inputs for one resource of a business: its path, a body, and another body for the same key. */
  prepare(biz: Biz): Promise<Prepared>;
  /** How many of the resource the business has (what a second run would add to). */
  rows(biz: Biz): Promise<number>;
  /** The resource's own moves ended (events written by a job that waits, which draining the queues does not wait for). */
  settled?(biz: Biz): Promise<unknown>;
}

const count = async (sql: string, params: unknown[]) => Number((await (await getDs()).query(sql, params))[0].n);
const ofBusiness = (table: string) => (biz: Biz) => count(`SELECT count(*) AS n FROM ${table} WHERE business_id = $1`, [biz.businessId]);

describe('idempotency records survive Redis losing them', function () {
  this.timeout(180_000);
  let api: ApiHarness;
  let pools: RunningPools;

  before(async () => {
    api = await startApi();
    pools = await startPools(['pricing', 'sandbox', 'settlement']);
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });

  async function newBusiness(): Promise<Biz> {
    const { businessId } = await makeBusiness();
    // Bursts and polls: a key no test meets the rate limit of.
    return { businessId, key: (await makeKey(businessId, { rateLimit: 1_000_000 })).key };
  }
  /** What Redis forgets: every idempotency key of the business (this file's prefix only). */
  const loseRedis = (biz: Biz) => deleteKeys(`${getConfig().redisPrefix}:idem:${biz.businessId}:*`);
  const post = (biz: Biz, path: string, idem: string, body: object) => api.http.post(`${BASE}${path}`).set(writeHeaders(biz.key, idem)).send(body);
  /** Rows, jobs and events: a replay or a refused request adds to none of them. */
  const snapshot = async (c: Case, biz: Biz) => {
    await c.settled?.(biz);
    await drainQueues(pools);
    return {
      rows: await c.rows(biz),
      jobs: await count(`SELECT count(*) AS n FROM outbox_jobs WHERE business_id = $1`, [biz.businessId]),
      events: await count(`SELECT count(*) AS n FROM events WHERE business_id = $1`, [biz.businessId]),
    };
  };

  /** An available quote: priced within the request's wait, or polled until the pricing pool (slow on a loaded machine) has. */
  async function quote(biz: Biz, body: Record<string, unknown>): Promise<{ id: string }> {
    const res = await post(biz, '/quotes', randomUUID(), { chain: 'base', currency: 'KES', payment_method: 'mobile_money', ...body });
    expect(res.status, res.text).to.be.oneOf([201, 202]);
    await until(async () => (await api.http.get(`${BASE}/quotes/${res.body.id}`).set(writeHeaders(biz.key))).body.status === 'available', { what: 'the quote priced' });
    return res.body;
  }
  const offrampQuote = async (biz: Biz, amount = '10') =>
    quote(biz, { direction: 'offramp', source_amount: amount, beneficiary_id: await kesBeneficiary(api, biz.key) });

  /** An off-ramp from an external wallet, underpaid (4 of 10 arrived) and past its deadline: action_required, refundable. */
  async function underpaidOfframp(biz: Biz): Promise<string> {
    const wallet = await verifiedWallet(api, biz.key);
    await fund(api, biz.key, wallet.id, '20');
    const q = await offrampQuote(biz);
    const tx = await post(biz, '/offramps', randomUUID(), { quote_id: q.id, funding_source: { wallet_id: wallet.id } });
    expect(tx.status, JSON.stringify(tx.body)).to.equal(201);
    expect((await post(biz, `/sandbox/settlements/${tx.body.id}/transfer`, randomUUID(), { amount: '4' })).status).to.equal(202);
    await until(async () => (await api.http.get(`${BASE}/transactions/${tx.body.id}/settlement`).set(writeHeaders(biz.key))).body.received_amount === '4.000000', { what: 'the transfer arriving' });
    await (await getDs()).query(`UPDATE settlements SET expires_at = now() - interval '1 second' WHERE transaction_id = $1`, [tx.body.id]);
    await expireSettlementJob.process({ data: { transactionId: tx.body.id } } as never, pools.deps);
    return tx.body.id;
  }

  const cases: Case[] = [
    {
      name: 'POST /customers',
      prepare: async () => ({ path: '/customers', body: { external_reference: `c-${randomUUID()}` }, other: { external_reference: `c-${randomUUID()}` } }),
      rows: ofBusiness('customers'),
    },
    {
      name: 'POST /quotes',
      prepare: async (biz) => {
        const beneficiary = await kesBeneficiary(api, biz.key);
        const body = { direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '10', beneficiary_id: beneficiary };
        return { path: '/quotes', body, other: { ...body, source_amount: '11' } };
      },
      rows: ofBusiness('quotes'),
    },
    {
      name: 'POST /offramps',
      prepare: async (biz) => {
        const wallet = await verifiedWallet(api, biz.key);
        const q = await offrampQuote(biz);
        const body = { quote_id: q.id, funding_source: { wallet_id: wallet.id }, external_reference: `o-${randomUUID()}` };
        return { path: '/offramps', body, other: { ...body, external_reference: `o-${randomUUID()}` } };
      },
      rows: ofBusiness('transactions'),
    },
    {
      name: 'POST /onramps',
      prepare: async (biz) => {
        const customer = await createCustomer(api, biz.key);
        const q = await quote(biz, { direction: 'onramp', destination_amount: '25', wallet_id: customer.wallet.id });
        const body = { quote_id: q.id, payment_method: { type: 'mobile_money', phone_number: '+254722480163', mobile_network: 'safaricom' } };
        return { path: '/onramps', body, other: { ...body, payment_method: { ...body.payment_method, phone_number: '+254722480164' } } };
      },
      rows: ofBusiness('transactions'),
    },
    {
      name: 'POST /payment-intents',
      prepare: async () => {
        const body = { amount: { currency: 'KES', value: '1500.00' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } };
        return { path: '/payment-intents', body, other: { ...body, amount: { currency: 'KES', value: '1600.00' } } };
      },
      rows: ofBusiness('payment_intents'),
    },
    {
      name: 'POST /payout-batches',
      prepare: async (biz) => {
        await fundTreasury(api, biz.businessId, '100');
        const body = { external_reference: `b-${randomUUID()}`, items: [{ beneficiary_id: await kesBeneficiary(api, biz.key), amount: { currency: 'KES', value: '1500' } }] };
        return { path: '/payout-batches', body, other: { ...body, external_reference: `b-${randomUUID()}` } };
      },
      rows: ofBusiness('payout_batches'),
    },
    {
      name: 'POST /treasury/withdrawals',
      prepare: async (biz) => {
        await fundTreasury(api, biz.businessId, '100');
        const wallet = await verifiedWallet(api, biz.key);
        return { path: '/treasury/withdrawals', body: { wallet_id: wallet.id, amount: '10' }, other: { wallet_id: wallet.id, amount: '11' } };
      },
      rows: ofBusiness('treasury_withdrawals'),
      // A withdrawal's completion is written by a delayed job (its confirmation): counted once it has ended.
      settled: (biz) => until(async () => (await count(`SELECT count(*) AS n FROM treasury_withdrawals WHERE business_id = $1 AND status = 'pending'`, [biz.businessId])) === 0, { what: 'the withdrawal ended' }),
    },
    {
      name: 'POST /transactions/{id}/refund',
      prepare: async (biz) => ({ path: `/transactions/${await underpaidOfframp(biz)}/refund`, body: {}, other: { refund_address: newAccount().address } }),
      // Each refund is one ledger entry out of the settlement's clearing.
      rows: (biz) => count(`SELECT count(*) AS n FROM journal_entries WHERE kind = 'offramp_refund' AND business_id = $1`, [biz.businessId]),
    },
  ];

  for (const c of cases) {
    describe(c.name, () => {
      it('after Redis loses the record: the same request replays byte for byte and writes nothing; another body is 422 idempotency_key_reused', async () => {
        const biz = await newBusiness();
        const { path, body, other } = await c.prepare(biz);
        const idem = randomUUID();
        const first = await post(biz, path, idem, body);
        expect(first.status, JSON.stringify(first.body)).to.be.within(200, 299);
        const before = await snapshot(c, biz);
        expect(before.rows).to.be.at.least(1);

        await loseRedis(biz);
        const replay = await post(biz, path, idem, body);
        expect(replay.status, replay.text).to.equal(first.status);
        expect(replay.text).to.equal(first.text);
        expect(replay.headers['idempotent-replayed']).to.equal('true');
        expect(replay.headers['x-request-id']).to.equal(first.headers['x-request-id']);
        expect(await snapshot(c, biz)).to.deep.equal(before);

        await loseRedis(biz);
        const reused = await post(biz, path, idem, other);
        expect(reused.status, reused.text).to.equal(422);
        expect(reused.body.error.code).to.equal('idempotency_key_reused');
        expect(await snapshot(c, biz)).to.deep.equal(before);
        // The record read back is cached again: the first body still replays, from Redis now.
        const again = await post(biz, path, idem, body);
        expect(again.text).to.equal(first.text);
        expect(again.headers['idempotent-replayed']).to.equal('true');
      });

      it('100 concurrent identical requests create exactly one; 100 more after Redis loses the record create none', async () => {
        const biz = await newBusiness();
        const { path, body } = await c.prepare(biz);
        const rowsBefore = await c.rows(biz);
        const idem = randomUUID();
        const burst = () => Promise.all(Array.from({ length: 100 }, () => post(biz, path, idem, body)));
        const settle = async (results: Response[], expected?: Response) => {
          const answered = results.filter((r) => r.status !== 409 || r.body.error.code !== 'idempotency_key_in_use');
          expect(answered.length).to.be.at.least(1);
          for (const r of answered) expect(r.status, r.text).to.be.within(200, 299);
          expect(new Set(answered.map((r) => r.text)).size).to.equal(1);
          if (expected) {
            for (const r of answered) expect([r.status, r.text, r.headers['idempotent-replayed']]).to.deep.equal([expected.status, expected.text, 'true']);
          }
          return answered[0];
        };
        const first = await settle(await burst());
        expect(await c.rows(biz)).to.equal(rowsBefore + 1);
        await loseRedis(biz);
        const replays = await burst();
        await settle(replays, first);
        expect(await c.rows(biz)).to.equal(rowsBefore + 1);
      });
    });
  }

  it('a 4xx that created nothing is stored too: replayed after Redis loses it', async () => {
    const biz = await newBusiness();
    const idem = randomUUID();
    const first = await post(biz, '/customers', idem, { external_reference: '' });
    expect(first.status).to.equal(400);
    await loseRedis(biz);
    const replay = await post(biz, '/customers', idem, { external_reference: '' });
    expect(replay.status).to.equal(400);
    expect(replay.text).to.equal(first.text);
    expect(replay.headers['idempotent-replayed']).to.equal('true');
    await loseRedis(biz);
    const fixed = await post(biz, '/customers', idem, { external_reference: `c-${randomUUID()}` });
    expect(fixed.status).to.equal(422);
    expect(fixed.body.error.code).to.equal('idempotency_key_reused');
    expect(await ofBusiness('customers')(biz)).to.equal(0);
  });

  it('the record is written with the resource, and Redis caches it for IDEMPOTENCY_CACHE_SECONDS only', async () => {
    const biz = await newBusiness();
    const idem = randomUUID();
    const created = await post(biz, '/customers', idem, { external_reference: `c-${randomUUID()}` });
    expect(created.status).to.equal(201);
    const [row] = await (await getDs()).query(`SELECT status, body, request_id FROM idempotency_records WHERE scope_key = $1`, [recordScopeKey(biz.businessId, 'sandbox', idem)]);
    expect(row).to.deep.equal({ status: 201, body: created.text, request_id: created.headers['x-request-id'] });
    const keys = await testRedis().keys(`${getConfig().redisPrefix}:idem:${biz.businessId}:*`);
    expect(keys).to.have.length(1);
    const ttl = await testRedis().ttl(keys[0]);
    expect(ttl).to.be.within(1, 600);
  });

  it('409 quote_already_used names the transaction the quote started and no longer asks for a new quote', async () => {
    const biz = await newBusiness();
    const wallet = await verifiedWallet(api, biz.key);
    const q = await offrampQuote(biz);
    const body = { quote_id: q.id, funding_source: { wallet_id: wallet.id } };
    const first = await post(biz, '/offramps', randomUUID(), body);
    expect(first.status).to.equal(201);
    const second = await post(biz, '/offramps', randomUUID(), body);
    expect(second.status).to.equal(409);
    expect(second.body.error.code).to.equal('quote_already_used');
    expect(second.body.error.details).to.deep.equal({ quote_id: q.id, transaction_id: first.body.id });
    expect(second.body.error.message).to.not.match(/new quote/i);
    expect(second.body.error.message).to.contain(first.body.id);
  });

  it('the purge deletes records past their retention in batches, and keeps the others', async () => {
    const ds = await getDs();
    const stamp = randomUUID();
    const keyOf = (i: number) => recordScopeKey(stamp, 'sandbox', `k-${i}`);
    for (let i = 0; i < 7; i++) {
      await ds.query(`INSERT INTO idempotency_records (scope_key, fingerprint, status, body, request_id, created_at) VALUES ($1, 'f', 201, '{}', 'r', now() - make_interval(hours => $2))`, [keyOf(i), i < 5 ? 25 : 1]);
    }
    const deleted = await purgeIdempotencyJob.process({ data: { olderThanSeconds: 86_400, batch: 2 } } as never, pools.deps);
    expect(deleted).to.be.at.least(5);
    const left: { n: string }[] = await ds.query(`SELECT count(*) AS n FROM idempotency_records WHERE scope_key = ANY($1)`, [Array.from({ length: 7 }, (_, i) => keyOf(i))]);
    expect(Number(left[0].n)).to.equal(2);
  });
});
