import { expect } from 'chai';
import { buildDocument } from '../../api/openapi/document.js';
import { errorCodesOf, noteUndeclared, undeclaredErrors } from '../../api/openapi/error-codes.js';
import { routes, schemas } from '../../api/routes/index.js';
import type { RouteDef } from '../../api/routes/route.js';
import { TAG_DESCRIPTIONS } from '../../api/openapi/descriptions.js';

const doc = buildDocument(routes, schemas);
const operations = Object.values(doc.paths).flatMap((item) => Object.values(item as Record<string, any>));
const resolve = (node: any): any => (node?.$ref ? node.$ref.slice(2).split('/').reduce((n: any, p: string) => n[p], doc) : node);

describe('the OpenAPI document', () => {
  it('has servers, contact, license, defined tags, and a description on every operation', () => {
    expect(doc.servers[0]).to.include.keys('url', 'description', 'x-internal');
    expect(doc.info.contact).to.have.property('name');
    expect(doc.info.license).to.have.property('identifier');
    const tags = new Set(doc.tags.map((t: { name: string; description: string }) => t.name));
    for (const t of doc.tags) expect(TAG_DESCRIPTIONS, `tag ${t.name} needs its description in api/openapi/descriptions.ts`).to.have.property(t.name);
    for (const op of operations) {
      expect(op.description, op.operationId).to.be.a('string').and.match(/Scope: |Any valid API key/);
      for (const tag of op.tags) expect(tags.has(tag), `${op.operationId}: tag ${tag}`).to.equal(true);
    }
  });

  it('declares response headers once and refers to them everywhere', () => {
    const responses = operations.flatMap((op) => Object.values(op.responses as Record<string, any>).map(resolve));
    for (const r of responses) for (const h of Object.values(r.headers ?? {}) as any[]) expect(h).to.have.property('$ref');
    expect(Object.keys(doc.components.headers)).to.include.members(['X-Request-Id', 'X-RateLimit-Limit', 'Retry-After']);
  });

  it('lists, per operation and status, exactly the codes it derives, each code with its own schema', () => {
    const offramp = operations.find((op) => op.operationId === 'createOfframp');
    const codesAt = (op: any, status: string): string[] => {
      const error = resolve(op.responses[status]).content['application/json'].schema.properties.error;
      return (error.oneOf ?? [error]).map((s: any) => resolve(s).properties.code.const);
    };
    expect(codesAt(offramp, '409')).to.have.members(['idempotency_key_in_use', 'quote_already_used', 'invalid_state', 'resource_archived']);
    expect(codesAt(offramp, '403')).to.have.members(['insufficient_scope', 'ip_not_allowed', 'live_not_enabled']);
    const account = operations.find((op) => op.operationId === 'getAccount');
    expect(codesAt(account, '403')).to.deep.equal(['ip_not_allowed']);
    expect(account.responses).to.not.have.keys('404', '409', '413', '422');
    expect(resolve(doc.components.schemas.InsufficientScopeError).properties.details.required).to.deep.equal(['required_scope']);
  });

  it('derives the pipeline codes from a route added later, and remembers a code it answered undeclared', () => {
    const route = { method: 'post', path: '/widgets/{id}', operationId: 'makeWidget', tag: 'Widgets', scope: 'customers:write', errors: ['invalid_state'] } as unknown as RouteDef;
    expect(errorCodesOf(route)).to.include.members(['idempotency_key_required', 'payload_too_large', 'insufficient_scope', 'not_found', 'invalid_state']);
    expect(errorCodesOf(route)).to.not.include('live_not_enabled');
    expect(noteUndeclared(route, 'invalid_state')).to.equal(false);
    expect(noteUndeclared(route, 'quote_expired')).to.equal(true);
    expect(undeclaredErrors.has('makeWidget: quote_expired')).to.equal(true);
    undeclaredErrors.delete('makeWidget: quote_expired');
  });
});
