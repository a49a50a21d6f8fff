import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { getDs } from '../helpers/shared.js';
import { expectLedgerSound, history, untilStatus } from '../helpers/ramps.js';
import { until } from '../helpers/until.js';
import { MOMO_CALLBACK_TOKEN, startLiveRail, type LiveRail } from '../helpers/live-rail.js';
import { momoOnramp, momoPayout, ugPhone } from '../helpers/momo-rail.js';
import type { FakeMomo } from '../helpers/fake-momo.js';
import { registry as metrics } from '../../shared/metrics.js';
import { ConfigError, loadConfig } from '../../shared/config.js';
import { providerFor } from '../../shared/providers/providers.js';
import { ProviderRequests } from '../../shared/providers/provider-requests.js';
import { answerOfOutcome } from '../../shared/kernel/payout-answers.js';

// Each failure class of the MTN MoMo rail (CONTRACT §14, §17) on the stand-in (test/helpers/fake-momo.ts: the last
// four digits of the number pick what MTN does), with the sandbox chain adapter standing in for the live chain.

const TRANSFER = '/disbursement/v1_0/transfer';
const RTP = '/collection/v1_0/requesttopay';
const FINAL = ['completed', 'failed', 'action_required'];

describe('live MTN MoMo: failure classes', function () {
  this.timeout(90_000);
  let rail: LiveRail;
  let momo: FakeMomo;
  before(async () => {
    rail = await startLiveRail({
      momo: true,
      env: { MOMO_STATUS_QUERY_AFTER_MS: '300', MOMO_REQUEST_TIMEOUT_MS: '700', PROVIDER_RETRY_BASE_MS: '200', QUOTE_WAIT_MS: '15000', REDIS_COMMAND_TIMEOUT_MS: '5000' },
    });
    momo = rail.momo!;
  });
  after(() => rail?.close());
  afterEach(expectLedgerSound);

  const posts = (path: string, externalId: string) => momo.requestsFor(externalId).filter((r) => r.path === path);
  const gets = (path: string, referenceId: string) => momo.log.filter((r) => r.method === 'GET' && r.path === `${path}/${referenceId}`);
  const stored = async (reference: string, kind = 'payout') => (await (await getDs()).query(`SELECT provider_reference, sends FROM provider_requests WHERE kind = $1 AND reference = $2`, [kind, reference]))[0];
  const contradictions = async () => (await metrics.getSingleMetric('rampway_provider_callbacks_contradicted_total')!.get()).values
    .filter((v) => v.labels.provider === 'mtn_momo').reduce((n, v) => n + v.value, 0);
  const callbackResult = async (since: Date) => until(async () => {
    const rows: { result: string | null }[] = await (await getDs()).query(`SELECT result FROM provider_callbacks WHERE provider = 'mtn_momo' AND received_at >= $1 ORDER BY received_at DESC LIMIT 1`, [since]);
    return rows[0]?.result ?? false;
  }, { what: 'the callback applied' });

  it('HTTP 5xx after MTN ran the transfer: the retry asks the status, which says SUCCESSFUL; nothing is sent twice', async () => {
    const { id } = await momoPayout(rail, ugPhone('0006'));
    const tx = await untilStatus(rail.api, rail.key, id, FINAL);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    expect(posts(TRANSFER, id)).to.have.length(1);
    expect(gets(TRANSFER, id).length).to.be.at.least(1);
    expect(momo.executions.get(id)).to.equal(1);
  });

  it('HTTP 5xx after MTN ran the requesttopay: asked, not prompted again, and the on-ramp completes', async () => {
    const id = await momoOnramp(rail, ugPhone('0050'));
    const tx = await untilStatus(rail.api, rail.key, id, FINAL);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    expect(posts(RTP, id)).to.have.length(1);
  });

  it('HTTP 503 before MTN ran it: the status says 404, so it goes again under the same X-Reference-Id and pays once', async () => {
    const { id } = await momoPayout(rail, ugPhone('0003'));
    const tx = await untilStatus(rail.api, rail.key, id, FINAL);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    expect(posts(TRANSFER, id).map((r) => r.referenceId)).to.deep.equal([id, id]);
    expect(momo.executions.get(id)).to.equal(1);
  });

  it('409 on a repeated reference (no answer, then a status that did not see it yet): the status is asked, and it paid once', async () => {
    momo.holdMs = 1500;
    try {
      const { id } = await momoPayout(rail, ugPhone('0008'));
      const tx = await untilStatus(rail.api, rail.key, id, FINAL);
      expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
      // The first request timed out; the status said 404; the same id went again and MTN answered 409.
      expect(posts(TRANSFER, id).map((r) => r.referenceId)).to.deep.equal([id, id]);
      expect(gets(TRANSFER, id).length).to.be.at.least(2);
      expect(momo.executions.get(id)).to.equal(1);
    } finally {
      momo.holdMs = 0;
    }
  });

  it('FAILED for a temporary reason: sent again under a new UUID, recorded before it left; paid once', async () => {
    const { id } = await momoPayout(rail, ugPhone('0009'));
    const tx = await untilStatus(rail.api, rail.key, id, FINAL);
    expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
    const sent = posts(TRANSFER, id);
    expect(sent).to.have.length(2);
    expect(sent[0].referenceId).to.equal(id);
    expect(sent[1].referenceId).to.match(/^[0-9a-f-]{36}$/).and.not.equal(id);
    expect(momo.statusOf(sent[0].referenceId!)).to.include({ status: 'FAILED', reason: 'INTERNAL_PROCESSING_ERROR' });
    const row = await stored(id);
    expect(row.provider_reference).to.equal(sent[1].referenceId);
    expect(row.sends).to.equal(2);
    expect(tx.provider_reference).to.equal(momo.statusOf(sent[1].referenceId!)!.financialTransactionId);
    expect(momo.executions.get(id)).to.equal(1);
  });

  it('two jobs of one payout at once, after MTN said "not paid, for now": one request leaves under a new UUID, the other answers pending; paid once', async () => {
    const { ds, config, log } = rail.pools.deps;
    const provider = providerFor('live', { db: ds, config, log }, 'UGX');
    const reference = randomUUID();
    const req = {
      reference, scope: { businessId: rail.biz.businessId, environment: 'live' as const }, currency: 'UGX', amount: '1000', payment_method: 'mobile_money' as const,
      account_holder_name: 'Payee', details: { phone_number: ugPhone('0009'), mobile_network: 'mtn' },
    };
    // The first request FAILED for a temporary reason (its status says so; stored as the status check stores it): a
    // new request may go, once.
    expect((await provider.payout(req)).status).to.equal('pending');
    const failed = await until(async () => {
      const known = await provider.queryStatus('payout', reference);
      return known?.status === 'temporary_failure' && known;
    }, { what: 'the first request FAILED' });
    await new ProviderRequests(ds, log, 'mtn_momo').store('payout', reference, failed, { answer: answerOfOutcome(failed.status) });
    const [a, b] = await Promise.all([provider.payout(req), provider.payout(req)]);
    expect([a.status, b.status].sort()).to.deep.equal(['pending', 'pending']);
    // One new X-Reference-Id (a second job that claimed after the first had sent asks MTN about that id, and may send
    // the same id again if MTN does not know it yet: MTN answers 409, never a second payment).
    const ids = new Set(posts(TRANSFER, reference).map((r) => r.referenceId));
    expect(ids.size, 'the first request and one more').to.equal(2);
    await until(() => momo.executions.get(reference) === 1, { what: 'the second request paid' });
    await new Promise((r) => setTimeout(r, 300));
    expect(momo.executions.get(reference)).to.equal(1);
  });

  it('NOT_ENOUGH_FUNDS on our account every time: sent again (each under a new UUID) up to PROVIDER_MAX_ATTEMPTS, then action_required', async () => {
    const { id } = await momoPayout(rail, ugPhone('0011'));
    const tx = await untilStatus(rail.api, rail.key, id, FINAL);
    expect(tx.status).to.equal('action_required');
    expect(tx.failure.code).to.equal('provider_unavailable');
    expect(tx.failure.message, JSON.stringify(tx.failure)).to.match(/NOT_ENOUGH_FUNDS/);
    const ids = posts(TRANSFER, id).map((r) => r.referenceId);
    // The tests run with PROVIDER_MAX_ATTEMPTS=2 (test/setup.ts).
    expect(ids, JSON.stringify(tx.failure)).to.have.length(2);
    expect(new Set(ids).size).to.equal(2);
  });

  it('permanent FAILED reasons: PAYEE_NOT_FOUND fails the payout and refunds the wallet; the payer\'s rejection and EXPIRED fail the on-ramp', async () => {
    const { id, walletId } = await momoPayout(rail, ugPhone('0002'));
    const tx = await untilStatus(rail.api, rail.key, id, FINAL);
    expect(tx.status).to.equal('failed');
    expect(tx.failure.code).to.equal('invalid_receiver');
    expect(tx.failure.message).to.contain('PAYEE_NOT_FOUND').and.not.contain('772340002');
    expect(tx.refund).to.include({ status: 'completed', amount: tx.source.total_required });
    const [{ balance }] = await (await getDs()).query(`SELECT balance::text FROM ledger_accounts WHERE wallet_id = $1`, [walletId]);
    expect(balance).to.equal('100000000');
    expect(posts(TRANSFER, id)).to.have.length(1);
    const [rejected, expired] = await Promise.all([momoOnramp(rail, ugPhone('0001')), momoOnramp(rail, ugPhone('0037'))]);
    const a = await untilStatus(rail.api, rail.key, rejected, ['failed', 'completed']);
    const b = await untilStatus(rail.api, rail.key, expired, ['failed', 'completed']);
    expect(a.failure.code).to.equal('collection_declined');
    expect(a.failure.message).to.contain('APPROVAL_REJECTED');
    expect(b.failure.code).to.equal('collection_timeout');
    expect(await history(rejected)).to.deep.equal(['created', 'awaiting_funds', 'failed']);
  });

  it('a contradicting callback changes nothing: a forged SUCCESSFUL for a rejected on-ramp, a forged FAILED for a paid payout', async () => {
    const before = await contradictions();
    const rejected = await momoOnramp(rail, ugPhone('0001'));
    await untilStatus(rail.api, rail.key, rejected, ['failed']);
    const { reason: _reason, ...rest } = momo.statusOf(rejected)!;
    const forged = { ...rest, status: 'SUCCESSFUL', financialTransactionId: '9999999999' };
    const at = new Date(Date.now() - 1000);
    expect(await momo.sendCallback(rejected, forged)).to.equal(200);
    expect(await callbackResult(at)).to.equal('contradicted');
    expect((await untilStatus(rail.api, rail.key, rejected, ['failed'])).status).to.equal('failed');
    expect(await history(rejected)).to.deep.equal(['created', 'awaiting_funds', 'failed']);

    const { id } = await momoPayout(rail, ugPhone('0012'));
    await untilStatus(rail.api, rail.key, id, ['completed']);
    const at2 = new Date(Date.now() - 1000);
    expect(await momo.sendCallback(id, { ...momo.statusOf(id)!, status: 'FAILED', reason: 'PAYEE_NOT_FOUND' })).to.equal(200);
    expect(await callbackResult(at2)).to.equal('contradicted');
    expect((await untilStatus(rail.api, rail.key, id, FINAL)).status).to.equal('completed');
    expect(await contradictions()).to.equal(before + 2);
  });

  it('PENDING for a while with the callback lost: asked again until final, never sent again', async () => {
    momo.pendingMs = 1500;
    try {
      const { id } = await momoPayout(rail, ugPhone('0044'));
      const onramp = await momoOnramp(rail, ugPhone('0044'));
      const tx = await untilStatus(rail.api, rail.key, id, FINAL);
      expect(tx.status, JSON.stringify(tx.failure)).to.equal('completed');
      expect((await untilStatus(rail.api, rail.key, onramp, FINAL)).status).to.equal('completed');
      expect(posts(TRANSFER, id)).to.have.length(1);
      expect(posts(RTP, onramp)).to.have.length(1);
      expect(gets(TRANSFER, id).length).to.be.at.least(2);
    } finally {
      momo.pendingMs = 600;
    }
  });

  it('duplicated and late callbacks: stored once, applied once; PUT and POST both accepted; a wrong token is 404', async () => {
    const id = await momoOnramp(rail, ugPhone('0022'));
    await untilStatus(rail.api, rail.key, id, ['completed']);
    const ds = await getDs();
    const rows = await ds.query(`SELECT count(*)::int AS n FROM provider_callbacks WHERE provider = 'mtn_momo' AND body->>'externalId' = $1`, [id]);
    expect(rows[0].n).to.equal(1);
    // Its stored body keeps the payer's number redacted.
    const [{ body }] = await ds.query(`SELECT body FROM provider_callbacks WHERE provider = 'mtn_momo' AND body->>'externalId' = $1`, [id]);
    expect(body.payer.partyId).to.equal('********0022');
    // A late callback (its result was lost, the status check applied it) moves nothing again.
    const lost = await momoOnramp(rail, ugPhone('0099'));
    await untilStatus(rail.api, rail.key, lost, ['completed']);
    momo.callbackMethod = 'POST';
    const at = new Date(Date.now() - 1000);
    expect(await momo.sendCallback(lost, momo.statusOf(lost)!)).to.equal(200);
    expect(await callbackResult(at)).to.match(/^unchanged/);
    momo.callbackMethod = 'PUT';
    expect(await history(lost)).to.deep.equal(['created', 'awaiting_funds', 'funded', 'processing', 'completed']);
    const wrong = await fetch(`${rail.apiUrl}/providers/momo/not-the-token-${'x'.repeat(20)}/collection`, { method: 'PUT', body: '{}' });
    expect(wrong.status).to.equal(404);
    const kind = await fetch(`${rail.apiUrl}/providers/momo/${MOMO_CALLBACK_TOKEN}/refund`, { method: 'PUT', body: '{}' });
    expect(kind.status).to.equal(404);
  });
});

describe('MTN MoMo configuration', () => {
  const full = {
    MOMO_CURRENCIES: 'UGX', MOMO_COLLECTION_SUBSCRIPTION_KEY: 'a', MOMO_COLLECTION_API_USER: 'b', MOMO_COLLECTION_API_KEY: 'c',
    MOMO_DISBURSEMENT_SUBSCRIPTION_KEY: 'd', MOMO_DISBURSEMENT_API_USER: 'e', MOMO_DISBURSEMENT_API_KEY: 'f', MOMO_CALLBACK_TOKEN: 'momo_token_0123456789', PUBLIC_BASE_URL: 'https://api.example',
  };
  const load = (env: Record<string, string>) => loadConfig({ ...process.env, ...env } as NodeJS.ProcessEnv);

  it('all or none: a half-configured rail refuses to boot, naming what is missing', () => {
    expect(() => load({ ...full, MOMO_DISBURSEMENT_API_KEY: '' })).to.throw(ConfigError, /MTN MoMo rail is half configured: MOMO_DISBURSEMENT_API_KEY is missing/);
    expect(() => load({ ...full, MOMO_CALLBACK_TOKEN: 'short' })).to.throw(ConfigError, /MOMO_CALLBACK_TOKEN must be 16 to 200/);
    expect(() => load({ ...full, MOMO_CURRENCIES: 'NGN' })).to.throw(ConfigError, /MOMO_CURRENCIES: NGN has no mobile money corridor on the mtn network/);
    const config = load({ ...full, MOMO_CURRENCIES: 'ugx, GHS' });
    expect(config.momo).to.deep.include({ currencies: ['UGX', 'GHS'], targetEnvironment: 'sandbox', baseUrl: 'https://sandbox.momodeveloper.mtn.com', statusQueryAfterMs: 60_000 });
    expect(load({}).momo.currencies).to.deep.equal([]);
  });
});
