import { expect } from 'chai';
import { buildDocument } from '../../api/openapi/document.js';
import { serializerFor } from '../../api/openapi/serializers.js';
import { routes, schemas } from '../../api/routes/index.js';
import type { RouteDef } from '../../api/routes/route.js';

const route = routes.find((r) => r.operationId === 'getCustomer')!;
const doc = buildDocument(routes, schemas);
const customer = {
  id: '0b6f7f0e-8f5e-4c39-9d7e-5a7f1b2c3d4e', external_reference: 'crm-1', display_name: 'Amina W', metadata: { tier: 'gold' }, status: 'active',
  wallet: {
    id: '1c6f7f0e-8f5e-4c39-9d7e-5a7f1b2c3d4f', type: 'managed_wallet', address: '0x44f649fc8Dc77694E6ABEF1aA966983Dd6ED7C64', asset: 'USDC',
    supported_chains: ['base', 'polygon'], ownership_status: 'verified', status: 'active',
  },
  archived_at: null, created_at: '2026-11-29T00:00:00.000Z', updated_at: '2026-11-29T00:00:00.000Z',
};

describe('answers serialized from their OpenAPI schemas', () => {
  it('compiles one serializer per operation from the document: what the schema declares leaves, nothing else', () => {
    const body = customer;
    const serialize = serializerFor(doc, route, false);
    expect(JSON.parse(serialize(200, body))).to.deep.equal(JSON.parse(JSON.stringify(body)));
    const leaked = JSON.parse(serialize(200, { ...body, api_key_hash: 'x'.repeat(64), internal_note: 'never shown' }));
    expect(leaked).to.not.have.any.keys('api_key_hash', 'internal_note');
  });

  it('in tests, an answer that differs from its schema throws, naming the operation and the path, never the value', () => {
    const body = customer;
    const serialize = serializerFor(doc, route, true);
    expect(() => serialize(200, body)).to.not.throw();
    let message = '';
    try {
      serialize(200, { ...body, secret_field: 'sk_do_not_print' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).to.equal('getCustomer 200: the answer does not match its OpenAPI schema at (body).secret_field (serialized: absent; the handler\'s: a string)');
    expect(message).to.not.include('sk_do_not_print');
  });

  it('an error answer or an undeclared status is serialized as it is', () => {
    const serialize = serializerFor(doc, route, true);
    const envelope = { error: { code: 'not_found', message: 'No such customer.', requestId: 'r', details: null, extra: 1 } };
    expect(serialize(404, envelope)).to.equal(JSON.stringify(envelope));
    expect(serialize(299, { anything: true })).to.equal('{"anything":true}');
  });

  it('every operation\'s answers compile; a transaction picks its shape by its direction', () => {
    for (const r of routes as RouteDef[]) {
      const serialize = serializerFor(doc, r, false);
      // An empty object lacks required fields: sent as it is (and logged), never a compile error or a 500.
      for (const status of Object.keys(r.responses).map(Number).filter((s) => s < 400 && r.responses[s]!.schema)) {
        expect(serialize(status, {}), `${r.operationId} ${status}`).to.equal('{}');
      }
    }
    // The documented examples of each shape, with a field neither declares.
    const getTransaction = serializerFor(doc, routes.find((r) => r.operationId === 'getTransaction')!, true);
    for (const shape of ['OfframpTransaction', 'OnrampTransaction']) {
      const example = doc.components.schemas[shape].examples[0] as Record<string, unknown>;
      expect(JSON.parse(getTransaction(200, example)), shape).to.deep.equal(example);
      expect(() => getTransaction(200, { ...example, extra: 1 }), shape).to.throw(/\(body\)\.extra/);
      expect(JSON.parse(serializerFor(doc, routes.find((r) => r.operationId === 'getTransaction')!, false)(200, { ...example, extra: 1 }))).to.deep.equal(example);
    }
  });
});
