import { expect } from 'chai';
import fc from 'fast-check';
import { ConfigError, loadConfig } from '../../shared/config.js';
import { DEFAULT_PLATFORM_FEE, priceQuote, wholeFiatRail } from '../../shared/domain/pricing.js';
import { toMinor } from '../../shared/domain/money.js';
import { outcomeOf, safeDescription, stkOutcome } from '../../shared/providers/daraja/result-codes.js';
import { parseDarajaCallback } from '../../shared/providers/daraja/callbacks.js';

const DARAJA = {
  DARAJA_CONSUMER_KEY: 'ck', DARAJA_CONSUMER_SECRET: 'cs', DARAJA_SHORTCODE: '174379', DARAJA_PASSKEY: 'pk', DARAJA_B2C_SHORTCODE: '600981',
  DARAJA_INITIATOR_NAME: 'api', DARAJA_SECURITY_CREDENTIAL: 'cred', DARAJA_CALLBACK_TOKEN: 'cbtok_0123456789abcdef', PUBLIC_BASE_URL: 'https://api.example.com',
};

describe('live M-Pesa configuration, result codes and whole-shilling pricing', () => {
  it('the Daraja rail is all or nothing, and its settings are checked at boot', () => {
    expect(loadConfig({}).daraja).to.include({ consumerKey: null, baseUrl: 'https://sandbox.safaricom.co.ke', statusQueryAfterMs: 60_000 });
    expect(loadConfig(DARAJA).daraja).to.include({ consumerKey: 'ck', b2cShortcode: '600981' });
    expect(() => loadConfig({ ...DARAJA, DARAJA_SECURITY_CREDENTIAL: '', DARAJA_INITIATOR_NAME: '' }))
      .to.throw(ConfigError, 'The M-Pesa Daraja rail is half configured: DARAJA_INITIATOR_NAME, DARAJA_SECURITY_CREDENTIAL are missing');
    expect(() => loadConfig({ ...DARAJA, PUBLIC_BASE_URL: '' })).to.throw(ConfigError, /PUBLIC_BASE_URL is missing/);
    expect(() => loadConfig({ ...DARAJA, DARAJA_CALLBACK_ALLOWED_IPS: '196.201.214.200, nonsense' })).to.throw(ConfigError, /DARAJA_CALLBACK_ALLOWED_IPS/);
    expect(loadConfig({ ...DARAJA, DARAJA_CALLBACK_ALLOWED_IPS: '196.201.214.200, 196.201.214.206' }).daraja.callbackAllowedIps).to.deep.equal(['196.201.214.200', '196.201.214.206']);
    expect(() => loadConfig({ DARAJA_BASE_URL: 'ftp://x' })).to.throw(ConfigError, /DARAJA_BASE_URL/);
  });

  it('the sandbox chain for live is a test seam only: refused in production', () => {
    expect(loadConfig({ RAMPWAY_TEST_LIVE_CHAIN: 'sandbox' }).liveChainOverride).to.equal('sandbox');
    expect(() => loadConfig({ RAMPWAY_TEST_LIVE_CHAIN: 'anvil' })).to.throw(ConfigError, /tests only/);
    expect(() => loadConfig({ RAMPWAY_TEST_LIVE_CHAIN: 'sandbox', NODE_ENV: 'production', DATABASE_URL: 'postgres://db.example/rampway', REDIS_URL: 'redis://redis.example:6379',
      ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 1).toString('base64')}`,
      WALLET_SEED: 'abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about',
      WALLET_SEED_LIVE: 'legal winner thank year wave sausage worth useful legal winner thank yellow', IDEMPOTENCY_SECRET: 's' }, { walletSeeds: true })).to.throw(ConfigError, /tests only/);
  });

  it('result codes: 0 success; 1, 1037, 500.001.1001 temporary for payouts; every non-zero STK result ends the prompt; the rest final', () => {
    expect(outcomeOf('payout', '0', '', 'AG_1').status).to.equal('succeeded');
    for (const code of ['1', '17', '26', '1001', '1037', '500.001.1001']) expect(outcomeOf('payout', code, '', null).status, code).to.equal('temporary_failure');
    expect(outcomeOf('payout', '2040', '', null).failure!.code).to.equal('invalid_receiver');
    expect(outcomeOf('payout', '2001', '', null)).to.deep.include({ status: 'rejected' });
    expect(stkOutcome('0', '', 'ws')).to.deep.equal({ status: 'succeeded', provider_reference: 'ws' });
    expect(stkOutcome('1032', '', 'ws').failure!.code).to.equal('collection_declined');
    expect(stkOutcome('1037', '', 'ws')).to.deep.include({ status: 'declined' });
    expect(stkOutcome('1037', '', 'ws').failure!.code).to.equal('collection_timeout');
    for (const code of ['1', '17', '26', '1001']) expect(stkOutcome(code, '', 'ws').status, code).to.equal('declined');
    expect(stkOutcome('1', 'Balance 254712345678 short', 'ws').failure!.message).to.not.contain('254712345678');
    expect(safeDescription('Receiver 254712345678 is not registered')).to.equal('Receiver [redacted] is not registered');
  });

  it('callbacks: a shape that is not Daraja\'s is not read; a one-item parameter list is read like a list', () => {
    expect(parseDarajaCallback('stk', { Body: {} })).to.equal(null);
    expect(parseDarajaCallback('result', { Result: { ResultCode: 0 } })).to.equal(null);
    const status = parseDarajaCallback('status', {
      Result: { ResultCode: 0, OriginatorConversationID: 'o', ConversationID: 'AG_1', ResultParameters: { ResultParameter: { Key: 'TransactionStatus', Value: 'Completed' } },
        ReferenceData: { ReferenceItem: { Key: 'Occasion', Value: 'tx-1' } } },
    });
    expect(status).to.deep.include({ kind: 'payout', reference: 'tx-1' });
    expect(status!.outcome.status).to.equal('succeeded');
  });

  it('live KES: the collected total and fees, and the payout, are whole shillings for any amount', () => {
    expect(wholeFiatRail('live', 'KES', 'paybill')).to.equal(true);
    expect(wholeFiatRail('sandbox', 'KES', 'mobile_money')).to.equal(false);
    const whole = (a: string) => toMinor(a, 2) % 100n === 0n;
    fc.assert(fc.property(fc.integer({ min: 20, max: 200_000 }), fc.integer({ min: 100, max: 40_000 }), (shillings, rate100) => {
      const rate = (rate100 / 100).toFixed(2);
      const base = { currency: 'KES', payment_method: 'mobile_money', rate, platform_fee: DEFAULT_PLATFORM_FEE, whole_fiat: true };
      try {
        const on = priceQuote({ ...base, direction: 'onramp', source_amount: String(shillings) });
        expect(whole(on.source.total_required) && whole(on.fees.provider) && whole(on.fees.platform), JSON.stringify({ ...on, minor: null })).to.equal(true);
        const wanted = priceQuote({ ...base, direction: 'onramp', destination_amount: on.destination.amount });
        expect(whole(wanted.source.amount)).to.equal(true);
        const off = priceQuote({ ...base, direction: 'offramp', destination_amount: String(shillings) });
        expect(off.destination.amount).to.equal(`${shillings}.00`);
      } catch (err) {
        if ((err as { code?: string }).code !== 'amount_out_of_range') throw err;
      }
    }), { numRuns: 300 });
  });
});
