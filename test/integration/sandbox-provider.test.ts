import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { getDs } from '../helpers/shared.js';
import { makeBusiness } from '../helpers/factories.js';
import { captureLogs } from '../helpers/log-capture.js';
import { CORRIDOR_EXAMPLES } from '../helpers/corridor-examples.js';
import { AppError } from '../../shared/errors.js';
import { AmountError } from '../../shared/domain/money.js';
import { listCorridors, type Corridor } from '../../shared/domain/corridors.js';
import type { Environment } from '../../shared/domain/chains.js';
import type { EventScope } from '../../shared/domain/events.js';
import { ProviderError, type CollectRequest, type PayoutRequest } from '../../shared/providers/provider.js';
import { providerFor } from '../../shared/providers/providers.js';
import { SandboxProvider, providerCallStats, sandboxProviderReference, sandboxReceipt } from '../../shared/providers/sandbox-provider.js';

// The field a corridor's payee is reached by, in the order the adapter reads them.
const DESTINATION_FIELDS = ['phone_number', 'account_number', 'iban', 'till_number', 'paybill_number', 'email'];

function primaryDestination(details: Record<string, string>): string {
  return DESTINATION_FIELDS.find((f) => details[f] !== undefined)!;
}

/** The corridor's valid example with its destination ending in `suffix` (an email's before the @). */
function detailsEnding(corridor: Corridor, suffix: string): Record<string, string> {
  const details = { ...CORRIDOR_EXAMPLES[`${corridor.currency}:${corridor.payment_method}`].valid };
  const field = primaryDestination(details);
  const value = details[field];
  details[field] = field === 'email' ? `payee${suffix}@example.ca` : value.slice(0, -4) + suffix;
  return details;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

describe('sandbox provider', () => {
  let ds: DataSource;
  let scope: EventScope;
  let provider: SandboxProvider;
  const logs = captureLogs('debug');

  const payout = (details: Record<string, string>, over: Partial<PayoutRequest> = {}): PayoutRequest => ({
    reference: randomUUID(), scope, currency: 'KES', amount: '1500.00', payment_method: 'mobile_money', account_holder_name: 'Amina Njeri', details, ...over,
  });
  const collection = (phone: string, over: Partial<CollectRequest> = {}): CollectRequest => ({
    reference: randomUUID(), scope, currency: 'KES', amount: '250.00', phone_number: phone, mobile_network: 'safaricom', ...over,
  });
  const rowsOf = async (reference: string) => (await ds.query(`SELECT * FROM provider_requests WHERE reference = $1`, [reference])) as Record<string, unknown>[];

  before(async () => {
    ds = await getDs();
    scope = { businessId: (await makeBusiness()).businessId, environment: 'sandbox' };
    provider = new SandboxProvider({ db: ds, log: logs.log });
  });

  describe('magic values', () => {
    it('declines a collection from a phone number ending in 0001, with a deterministic provider reference', async () => {
      const req = collection('+254722480001');
      const outcome = await provider.collect(req);
      expect(outcome).to.deep.equal({
        status: 'declined',
        provider_reference: sandboxProviderReference('collection', req.reference),
        failure: { code: 'collection_declined', message: outcome.failure!.message },
      });
      expect(outcome.provider_reference).to.match(/^SBX[0-9A-F]{16}$/);
    });

    it('collects from any other phone number at once', async () => {
      const req = collection('+254722480163');
      expect(await provider.collect(req)).to.deep.equal({ status: 'succeeded', provider_reference: sandboxProviderReference('collection', req.reference), receipt: sandboxReceipt('collection', req.reference) });
    });

    for (const corridor of listCorridors()) {
      const name = `${corridor.currency} ${corridor.payment_method}`;
      it(`${name}: pays out, rejects a destination ending in 0002, fails temporarily on 0003`, async () => {
        const base = { currency: corridor.currency, payment_method: corridor.payment_method, amount: corridor.min_amount };
        const ok = payout(CORRIDOR_EXAMPLES[`${corridor.currency}:${corridor.payment_method}`].valid, base);
        expect(await provider.payout(ok)).to.deep.equal({ status: 'succeeded', provider_reference: sandboxProviderReference('payout', ok.reference), receipt: sandboxReceipt('payout', ok.reference) });

        const rejected = await provider.payout(payout(detailsEnding(corridor, '0002'), base));
        expect(rejected.status).to.equal('rejected');
        expect(rejected.failure?.code).to.equal('payout_rejected');
        expect(rejected.provider_reference).to.match(/^SBX/);

        const temporary = await provider.payout(payout(detailsEnding(corridor, '0003'), base));
        expect(temporary).to.deep.include({ status: 'temporary_failure', provider_reference: null });
        expect(temporary.failure?.code).to.equal('provider_unavailable');
      });
    }

    it('reads a PayBill payout by its account number as well as its PayBill number', async () => {
      const base = { payment_method: 'paybill' as const };
      expect((await provider.payout(payout({ paybill_number: '888880', account_number: 'INV-0002' }, base))).status).to.equal('rejected');
      expect((await provider.payout(payout({ paybill_number: '880002', account_number: 'INV-7781' }, base))).status).to.equal('rejected');
      expect((await provider.payout(payout({ paybill_number: '888880', account_number: 'INV-0003' }, base))).status).to.equal('temporary_failure');
    });
  });

  describe('idempotency on (kind, reference)', () => {
    it('a repeated payout answers the first outcome from one recorded request, counting the attempts', async () => {
      const req = payout({ phone_number: '+254722480163', mobile_network: 'safaricom' });
      const first = await provider.payout(req);
      const second = await provider.payout(req);
      expect(second).to.deep.equal(first);
      expect(await providerCallStats(ds, 'payout', req.reference)).to.deep.equal({ requests: 1, attempts: 2, evaluations: 1, outcome: first });
      expect(await rowsOf(req.reference)).to.have.length(1);
    });

    it('a repeated collection answers the first outcome, declined included', async () => {
      const req = collection('+254722480001');
      const first = await provider.collect(req);
      expect(await provider.collect({ ...req, amount: '250' })).to.deep.equal(first);
      expect(await providerCallStats(ds, 'collection', req.reference)).to.include({ requests: 1, attempts: 2, evaluations: 1 });
    });

    it('a payout and a collection with the same reference are separate requests', async () => {
      const reference = randomUUID();
      await provider.payout(payout({ phone_number: '+254722480163', mobile_network: 'safaricom' }, { reference }));
      await provider.collect(collection('+254722480163', { reference }));
      expect(await rowsOf(reference)).to.have.length(2);
    });

    it('a temporary failure is evaluated again on every attempt and stays temporary', async () => {
      const req = payout({ phone_number: '+254722480003', mobile_network: 'safaricom' });
      for (let i = 0; i < 3; i++) expect((await provider.payout(req)).status).to.equal('temporary_failure');
      expect(await providerCallStats(ds, 'payout', req.reference)).to.include({ requests: 1, attempts: 3, evaluations: 3 });
    });

    it('queryStatus answers the recorded outcome, and null for a reference the provider never saw', async () => {
      const req = payout({ account_number: '0123450002', bank_code: '058' }, { currency: 'NGN', payment_method: 'bank_transfer', amount: '100.00' });
      const outcome = await provider.payout(req);
      expect(await provider.queryStatus('payout', req.reference)).to.deep.equal(outcome);
      expect(await provider.queryStatus('collection', req.reference)).to.equal(null);
      expect(await provider.queryStatus('payout', randomUUID())).to.equal(null);
    });

    it('refuses a reference reused for another amount or another business, and changes nothing', async () => {
      const req = payout({ phone_number: '+254722480163', mobile_network: 'safaricom' });
      const first = await provider.payout(req);
      const other: EventScope = { businessId: (await makeBusiness()).businessId, environment: 'sandbox' };
      for (const retry of [{ ...req, amount: '1500.01' }, { ...req, scope: other }, { ...req, details: { phone_number: '+254722489999', mobile_network: 'safaricom' } }]) {
        const err = await rejection(provider.payout(retry));
        expect(err).to.be.instanceOf(AppError).with.property('code', 'invalid_state');
      }
      expect(await providerCallStats(ds, 'payout', req.reference)).to.deep.equal({ requests: 1, attempts: 1, evaluations: 1, outcome: first });
    });

    it('20 parallel payouts with one reference leave one succeeded request', async () => {
      const req = payout({ phone_number: '+254722480163', mobile_network: 'safaricom' });
      const outcomes = await Promise.all(Array.from({ length: 20 }, () => provider.payout(req)));
      const expected = { status: 'succeeded', provider_reference: sandboxProviderReference('payout', req.reference), receipt: sandboxReceipt('payout', req.reference) };
      for (const o of outcomes) expect(o).to.deep.equal(expected);
      expect(await providerCallStats(ds, 'payout', req.reference)).to.deep.equal({ requests: 1, attempts: 20, evaluations: 1, outcome: expected });
      expect(await rowsOf(req.reference)).to.have.length(1);
    });
  });

  describe('requests it refuses', () => {
    it('bad amounts and payouts without a destination, recording nothing', async () => {
      const bad = [
        [payout({ phone_number: '+254722480163' }, { amount: '10.001' }), AmountError],
        [payout({ phone_number: '+254722480163' }, { amount: '0.00' }), AmountError],
        [payout({ bank_code: '058' }), AppError],
      ] as const;
      for (const [req, type] of bad) {
        expect(await rejection(provider.payout(req))).to.be.instanceOf(type);
        expect(await rowsOf(req.reference)).to.have.length(0);
      }
    });

    it('never simulates a live request', async () => {
      const req = payout({ phone_number: '+254722480163' }, { scope: { ...scope, environment: 'live' } });
      expect(await rejection(provider.payout(req))).to.be.instanceOf(AppError).with.property('code', 'internal_error');
      expect(await rowsOf(req.reference)).to.have.length(0);
    });
  });

  describe('providerFor', () => {
    it('gives the sandbox adapter for sandbox', () => {
      // Wrapped for metrics (providerFor instruments every adapter), so it is recognised by its id.
      expect(providerFor('sandbox', { db: ds }, 'KES')).to.have.property('id', 'sandbox');
    });

    for (const environment of ['live', 'staging']) {
      it(`${environment}: service_unavailable until a provider is configured`, () => {
        let err: unknown;
        try {
          providerFor(environment as Environment, { db: ds }, 'KES');
        } catch (e) {
          err = e;
        }
        expect(err).to.be.instanceOf(AppError).with.property('code', 'service_unavailable');
        expect((err as AppError).retryAfterSeconds).to.be.greaterThan(0);
      });
    }

    it('ProviderError is a retryable service_unavailable', () => {
      const err = new ProviderError('Daraja timed out', '500.001.1001');
      expect(err).to.be.instanceOf(AppError).and.include({ code: 'service_unavailable', providerCode: '500.001.1001', name: 'ProviderError' });
    });
  });

  describe('redaction', () => {
    it('stores and logs no phone number, account number, IBAN or email: at most the last 4 characters', async () => {
      const local = captureLogs('debug');
      const redacting = new SandboxProvider({ db: ds, log: local.log });
      const sensitive: string[] = [];
      const references: string[] = [];
      for (const corridor of listCorridors()) {
        for (const suffix of [null, '0002', '0003']) {
          const details = suffix ? detailsEnding(corridor, suffix) : CORRIDOR_EXAMPLES[`${corridor.currency}:${corridor.payment_method}`].valid;
          const req = payout(details, { currency: corridor.currency, payment_method: corridor.payment_method, amount: corridor.min_amount });
          await redacting.payout(req);
          references.push(req.reference);
          for (const f of corridor.fields) if (f.sensitive && details[f.name]) sensitive.push(details[f.name]);
        }
      }
      for (const phone of ['+254722480001', '+254733915577']) {
        const req = collection(phone);
        await redacting.collect(req);
        references.push(req.reference);
        sensitive.push(phone);
      }
      const rows: { request: { destination_last4: string }; text: string }[] = await ds.query(
        `SELECT request, row_to_json(p)::text AS text FROM provider_requests p WHERE reference = ANY($1)`,
        [references],
      );
      expect(rows).to.have.length(references.length);
      for (const row of rows) expect(row.request.destination_last4).to.have.length(4);
      expect(local.lines()).to.have.length(references.length);
      const stored = rows.map((r) => r.text).join('\n');
      for (const value of sensitive) {
        expect(stored, 'provider_requests').not.to.include(value);
        expect(local.text(), 'logs').not.to.include(value);
      }
      expect(local.text()).not.to.include('Amina');
    });
  });
});
