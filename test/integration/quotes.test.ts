import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import type { Response } from 'supertest';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { BASE, createCustomer, externalWallet } from '../helpers/wallets.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { deleteKeys, getDs } from '../helpers/shared.js';
import { getConfig } from '../../shared/config.js';
import { priceQuoteJob } from '../../workers/pricing/price-quote.job.js';
import { sweepJob } from '../../workers/sweeper/sweep.job.js';
import { until } from '../helpers/until.js';
import { quoteJobs } from '../../shared/domain/quotes.js';

const KES_PHONE = { phone_number: '+254722480163', mobile_network: 'safaricom' };

describe('quotes priced by the pricing pool', () => {
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;
  let beneficiaryId: string;
  let walletId: string;

  const post = (body: Record<string, unknown>, k = key) => api.http.post(`${BASE}/quotes`).set(writeHeaders(k)).send(body);
  const offramp = (extra: Record<string, unknown>) => post({ direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', beneficiary_id: beneficiaryId, ...extra });
  const onramp = (extra: Record<string, unknown>) => post({ direction: 'onramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', wallet_id: walletId, ...extra });

  async function beneficiary(k: string, body: Record<string, unknown> = {}): Promise<string> {
    const res = await api.http.post(`${BASE}/beneficiaries`).set(writeHeaders(k)).send({
      currency: 'KES', payment_method: 'mobile_money', account_holder_name: 'Amina W', details: KES_PHONE, ...body,
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.id;
  }

  before(async () => {
    api = await startApi();
    pools = await startPools(['pricing']);
    key = (await makeBusiness()).sandboxKey;
    beneficiaryId = await beneficiary(key);
    walletId = (await createCustomer(api, key)).wallet.id;
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });

  it('an off-ramp by source amount is priced in time: 201 available, exact amounts, the event written', async () => {
    const res = await offramp({ source_amount: '100' });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const q = res.body;
    expect(q).to.deep.include({ direction: 'offramp', status: 'available', chain: 'base', currency: 'KES', payment_method: 'mobile_money', exchange_rate: '129.35' });
    expect(q.source).to.deep.equal({ asset: 'USDC', amount: '100.000000', total_required: '101.500000' });
    expect(q.destination).to.deep.equal({ currency: 'KES', amount: '12935.00' });
    expect(q.fees).to.deep.equal({ provider: '1.000000', platform: '0.500000', currency: 'USDC' });
    const ttl = Date.parse(q.expires_at) - Date.parse(q.created_at);
    expect(ttl).to.be.within(119_000, 125_000);
    const again = await api.http.get(`${BASE}/quotes/${q.id}`).set(bearer(key));
    expect(again.body).to.deep.equal(q);
    // The answer is the pricing job's: the quote as its unit committed it, handed to the waiting request (not read again),
    // and written by that unit into the request's idempotency record, which the request leaves as it is: the record's
    // last writer is the transaction that priced the quote.
    const job = await pools.deps.queues.pricing.getJob(quoteJobs.price(q.id).id);
    expect(job!.returnvalue).to.deep.equal({ outcome: 'available', quote: q, answer: res.text });
    const [record] = await (await getDs()).query(
      `SELECT r.status, r.body, r.replaceable, r.xmin::text = q.xmin::text AS priced_with_quote FROM idempotency_records r, quotes q WHERE r.request_id = $1 AND q.id = $2`,
      [res.headers['x-request-id'], q.id],
    );
    expect(record).to.deep.equal({ status: 201, body: res.text, replaceable: false, priced_with_quote: true });
    const events = await (await getDs()).query(`SELECT type, data FROM events WHERE data->>'id' = $1`, [q.id]);
    expect(events.map((e: { type: string }) => e.type)).to.deep.equal(['quote.available']);
    expect(events[0].data.source).to.deep.equal(q.source);
  });

  it('an on-ramp by destination amount quotes the smallest payment that delivers it', async () => {
    const res = await onramp({ destination_amount: '50' });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const q = res.body;
    expect(q.destination).to.deep.equal({ asset: 'USDC', amount: '50.000000', chain: 'base' });
    expect(q.source.currency).to.equal('KES');
    // 50 USDC at 129.35 is exactly 6467.50 KES; one cent less would deliver less than 50.
    expect(q.source.amount).to.equal('6467.50');
    expect(Number(q.source.total_required)).to.be.greaterThan(6467.5);
    expect(q.fees.currency).to.equal('KES');
  });

  it('refuses what it cannot price with the right code', async () => {
    const bad = async (res: { status: number; body: any }, status: number, code: string) => {
      expect(res.status, JSON.stringify(res.body)).to.equal(status);
      expect(res.body.error.code).to.equal(code);
      return res.body.error;
    };
    await bad(await offramp({ source_amount: '1', destination_amount: '100' }), 400, 'invalid_request');
    await bad(await offramp({}), 400, 'invalid_request');
    await bad(await offramp({ source_amount: '1.1234567' }), 400, 'invalid_request');
    await bad(await offramp({ source_amount: '0' }), 400, 'invalid_request');
    await bad(await offramp({ source_amount: 100 }), 400, 'invalid_request');
    await bad(await offramp({ source_amount: '1e3' }), 400, 'invalid_request');
    await bad(await offramp({ destination_amount: '10.001' }), 400, 'invalid_request'); // KES has 2 decimals
    await bad(await offramp({ source_amount: '10', beneficiary_id: undefined }), 400, 'invalid_request');
    await bad(await offramp({ source_amount: '10', beneficiary_id: randomUUID() }), 404, 'not_found');
    const mismatch = await bad(await post({ direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'paybill', beneficiary_id: beneficiaryId, source_amount: '10' }), 422, 'unsupported_corridor');
    expect(mismatch.details.reason).to.equal('beneficiary_mismatch');
    await bad(await post({ direction: 'offramp', chain: 'base', currency: 'NGN', payment_method: 'mobile_money', beneficiary_id: beneficiaryId, source_amount: '10' }), 422, 'unsupported_corridor');
    const { wallet } = await externalWallet(api, key);
    await bad(await onramp({ destination_amount: '5', wallet_id: wallet.id }), 422, 'wallet_not_verified');
    const archived = await beneficiary(key);
    await api.http.delete(`${BASE}/beneficiaries/${archived}`).set(writeHeaders(key));
    await bad(await offramp({ source_amount: '10', beneficiary_id: archived }), 409, 'resource_archived');
  });

  it('a price outside the corridor\'s limits is 422 amount_out_of_range, and the quote reads failed', async () => {
    const res = await offramp({ source_amount: '0.01' });
    const err = res.body.error;
    expect(res.status, JSON.stringify(res.body)).to.equal(422);
    expect(err.code).to.equal('amount_out_of_range');
    expect(err.details).to.include({ currency: 'KES' });
    const [row] = await (await getDs()).query(`SELECT status, failure FROM quotes WHERE business_id = (SELECT business_id FROM beneficiaries WHERE id = $1) ORDER BY created_at DESC LIMIT 1`, [beneficiaryId]);
    expect(row.status).to.equal('failed');
    expect(row.failure.code).to.equal('amount_out_of_range');
  });

  it('with the pricing pool down it answers 202 pending, and the quote is priced once the pool is back', async () => {
    await pools.close();
    try {
      const res = await offramp({ source_amount: '20' });
      expect(res.status, JSON.stringify(res.body)).to.equal(202);
      expect(res.body).to.deep.include({ status: 'pending', exchange_rate: null, fees: null, expires_at: null });
      expect(res.body.source).to.deep.equal({ asset: 'USDC', amount: '20.000000', total_required: null });
      pools = await startPools(['pricing']);
      const status = await until(async () => {
        const s: string = (await api.http.get(`${BASE}/quotes/${res.body.id}`).set(bearer(key))).body.status;
        return s !== 'pending' && s;
      }, { timeoutMs: 5_000, what: 'the quote being priced' });
      expect(status).to.equal('available');
      // The request closed its record when its wait ran out: the pricing that came later left the 202 it sent.
      expect(await recordOf(res)).to.deep.equal({ status: 202, body: res.text, replaceable: false });
    } finally {
      pools = pools ?? (await startPools(['pricing']));
    }
  });

  /** The idempotency record a request's answer left. */
  const recordOf = async (res: { headers: Record<string, string> }) =>
    (await (await getDs()).query(`SELECT status, body, replaceable FROM idempotency_records WHERE request_id = $1`, [res.headers['x-request-id']]))[0];

  /**
   * An off-ramp quote asked for by an API that waits `waitMs` while the pricing pool is down: `during` gets the answer to
   * come, a way to ask again with the same key, and the quote's pricing job, to run by hand (outside BullMQ, so no end
   * reaches the waiting request).
   */
  async function pricedByHand(waitMs: number, amount: string, during: (c: {
    first: Promise<Response>; again: () => Promise<Response>; price: () => Promise<{ outcome: string; answer?: string }>; api: ApiHarness;
  }) => Promise<void>): Promise<void> {
    await pools.close();
    const slow = await startApi({ env: { QUOTE_WAIT_MS: String(waitMs) } });
    const here = await startPools(['webhooks']);
    try {
      const idem = randomUUID();
      const body = { direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', beneficiary_id: beneficiaryId, source_amount: amount };
      const again = () => slow.http.post(`${BASE}/quotes`).set(writeHeaders(key, idem)).send(body).then((r) => r);
      const first = again();
      const job = await until(async () => (await here.deps.queues.pricing.getWaiting()).find((j) => j.name === 'quote.price' && j.data.answers), { what: 'the pricing job' });
      const price = async () => {
        const done = (await priceQuoteJob.process({ data: job.data } as never, here.deps)) as { outcome: string; answer?: string };
        await job.remove();
        return done;
      };
      await during({ first, again, price, api: slow });
    } finally {
      await here.close();
      await slow.close();
      pools = await startPools(['pricing']);
    }
  }

  it('priced while the request waits but never told it, answers what the pricing wrote into its record', async () => {
    // Its wait runs out, it closes its record, and finds the priced answer the pricing unit wrote there.
    await pricedByHand(1500, '21', async ({ first, again, price }) => {
      const priced = await price();
      const res = await first;
      expect(res.status, res.text).to.equal(201);
      expect(res.text).to.equal(priced.answer);
      expect(await recordOf(res)).to.deep.equal({ status: 201, body: res.text, replaceable: false });
      // Redis forgets the key: the replay, from PostgreSQL, is the same answer byte for byte.
      await deleteKeys(`${getConfig().redisPrefix}:idem:*`);
      const replay = await again();
      expect([replay.status, replay.text, replay.headers['idempotent-replayed']]).to.deep.equal([201, res.text, 'true']);
    });
  });

  it('a wait that ends without the priced answer (its process shutting down) closes the record: a pricing after it leaves the 202 sent', async () => {
    await pricedByHand(5000, '23', async ({ first, price, api: slow }) => {
      await slow.deps.pricingWaiters.close();
      const res = await first;
      expect(res.status, res.text).to.equal(202);
      const priced = await price();
      expect([priced.outcome, priced.answer]).to.deep.equal(['available', undefined]);
      expect(await recordOf(res)).to.deep.equal({ status: 202, body: res.text, replaceable: false });
    });
  });

  it('a replay while the request waits (Redis forgot its key) closes the record: the pricing after it leaves the 202 both answer', async () => {
    await pricedByHand(2500, '22', async ({ first, again, price }) => {
      await deleteKeys(`${getConfig().redisPrefix}:idem:*`);
      const replay = await again();
      expect([replay.status, replay.headers['idempotent-replayed']], replay.text).to.deep.equal([202, 'true']);
      const priced = await price();
      expect(priced.outcome).to.equal('available');
      expect(priced.answer, 'the record was closed: not replaced').to.equal(undefined);
      const res = await first;
      expect([res.status, res.text]).to.deep.equal([202, replay.text]);
      expect(await recordOf(res)).to.deep.equal({ status: 202, body: res.text, replaceable: false });
    });
  });

  it('expires at expires_at (read as expired at once, then moved by expiry.quotes within a second or so)', async () => {
    const shortLived = await startApi();
    await pools.close();
    pools = await startPools(['pricing'], { env: { QUOTE_TTL_SECONDS: '1' } });
    try {
      const res = await offramp({ source_amount: '30' });
      expect(res.status).to.equal(201);
      await new Promise((r) => setTimeout(r, 1100));
      expect((await api.http.get(`${BASE}/quotes/${res.body.id}`).set(bearer(key))).body.status).to.equal('expired');
      await until(async () => (await (await getDs()).query(`SELECT status FROM quotes WHERE id = $1`, [res.body.id]))[0].status === 'expired', {
        timeoutMs: 10_000, what: 'the expiry job moving the stored quote',
      });
      const history = await (await getDs()).query(`SELECT from_status, to_status FROM status_history WHERE resource_id = $1 ORDER BY id`, [res.body.id]);
      expect(history).to.deep.equal([{ from_status: 'pending', to_status: 'available' }, { from_status: 'available', to_status: 'expired' }]);
    } finally {
      await shortLived.close();
      await pools.close();
      pools = await startPools(['pricing']);
    }
  });

  it('the sweeper prices a quote whose job never reached Redis', async () => {
    const ds = await getDs();
    const [{ business_id: businessId }] = await ds.query(`SELECT business_id FROM beneficiaries WHERE id = $1`, [beneficiaryId]);
    const id = randomUUID();
    await ds.query(
      `INSERT INTO quotes (id, business_id, environment, direction, chain, currency, payment_method, requested_side, requested_amount, beneficiary_id, created_at)
       VALUES ($1, $2, 'sandbox', 'offramp', 'base', 'KES', 'mobile_money', 'source', 40, $3, now() - interval '1 minute')`,
      [id, businessId, beneficiaryId],
    );
    const counts = await sweepJob.process({ data: {} } as never, pools.deps);
    expect(counts).to.have.property('quotes pending without a price').that.is.at.least(1);
    const status = await until(async () => {
      const s: string = (await ds.query(`SELECT status FROM quotes WHERE id = $1`, [id]))[0].status;
      return s !== 'pending' && s;
    }, { timeoutMs: 5_000, what: 'the swept quote being priced' });
    expect(status).to.equal('available');
  });

  it('a live key: 403 until the business is enabled, then 503 while live pricing is not configured', async () => {
    const biz = await makeBusiness();
    const body = { direction: 'offramp', chain: 'base', currency: 'KES', payment_method: 'mobile_money', source_amount: '10', beneficiary_id: randomUUID() };
    const refused = await post(body, biz.liveKey);
    expect(refused.status).to.equal(403);
    expect(refused.body.error.code).to.equal('live_not_enabled');
    await (await getDs()).query(`UPDATE businesses SET live_enabled = true WHERE id = $1`, [biz.businessId]);
    api.keyCache.clear?.();
    const fresh = await startApi();
    try {
      const res = await fresh.http.post(`${BASE}/quotes`).set(writeHeaders(biz.liveKey)).send(body);
      expect(res.status, JSON.stringify(res.body)).to.equal(503);
      expect(res.body.error.code).to.equal('service_unavailable');
    } finally {
      await fresh.close();
    }
  });
});
