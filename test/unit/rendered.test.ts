import { expect } from 'chai';
import { buildDocument } from '../../api/openapi/document.js';
import { componentSerializer, serializerFor } from '../../api/openapi/serializers.js';
import { Rendered, RenderedPage, RenderedRows, renderedBytes } from '../../api/rendered.js';
import { routes, schemas } from '../../api/routes/index.js';

const doc = buildDocument(routes, schemas);
const offramp = doc.components.schemas.OfframpTransaction.examples[0] as Record<string, unknown>;
const onramp = doc.components.schemas.OnrampTransaction.examples[0] as Record<string, unknown>;
const text = <R extends { id: string }>(rows: RenderedRows, row: R, version: string, view: (row: R) => unknown) => rows.bytes(row, version, view).toString();

describe('rows rendered once per version (api/rendered.ts)', () => {
  it('renders a row once per version its read saw, again for another version, and only what its schema declares', () => {
    const rows = new RenderedRows(componentSerializer(doc, 'Transaction', false));
    let views = 0;
    const view = (row: { id: string; status: string }) => {
      views += 1;
      return { ...offramp, id: row.id, status: row.status, internal_note: 'never shown' };
    };
    const id = offramp.id as string;
    const first = text(rows, { id, status: 'awaiting_funds' }, '1001', view);
    expect(text(rows, { id, status: 'awaiting_funds' }, '1001', view)).to.equal(first);
    expect(views).to.equal(1);
    // A new version (an update wrote the row again): rendered from what this read saw, never the kept text.
    const moved = text(rows, { id, status: 'completed' }, '1002', view);
    expect(views).to.equal(2);
    expect(JSON.parse(moved).status).to.equal('completed');
    expect(JSON.parse(moved)).to.not.have.property('internal_note');
    // The version is the row's own: another id with the same version is another text.
    const other = text(rows, { id: onramp.id as string, status: 'completed' }, '1002', () => onramp);
    expect(JSON.parse(other)).to.deep.equal(onramp);
    expect(views).to.equal(2);
    // What a page's first step asks: the text of exactly this version, if one is kept.
    expect(rows.kept(id, '1002')?.toString()).to.equal(moved);
    expect(rows.kept(id, '1001')).to.equal(undefined);
    expect(rows.kept('never-read', '1002')).to.equal(undefined);
  });

  it('trusts a kept text for ten minutes at most (a 32-bit xmin comes round again, in far longer)', () => {
    const rows = new RenderedRows(componentSerializer(doc, 'Transaction', false));
    let views = 0;
    const view = () => {
      views += 1;
      return offramp;
    };
    const realNow = Date.now;
    try {
      const start = realNow();
      Date.now = () => start;
      text(rows, { id: 'a' }, '7', view);
      Date.now = () => start + 9 * 60_000;
      text(rows, { id: 'a' }, '7', view);
      expect(views).to.equal(1);
      Date.now = () => start + 11 * 60_000;
      expect(rows.kept('a', '7')).to.equal(undefined);
      text(rows, { id: 'a' }, '7', view);
      expect(views).to.equal(2);
    } finally {
      Date.now = realNow;
    }
  });

  it('in tests, a rendered row with a field its schema does not declare throws, as any answer does', () => {
    const rows = new RenderedRows(componentSerializer(doc, 'Transaction', true));
    expect(() => text(rows, { id: 'a' }, '1', () => ({ ...offramp, secret: 'x' }))).to.throw(/Transaction: the answer does not match its OpenAPI schema at \(body\)\.secret/);
    expect(JSON.parse(text(rows, { id: 'b' }, '1', () => onramp))).to.deep.equal(onramp);
  });

  it('a rendered page is byte for byte what the operation\'s serializer makes of the same page', () => {
    const serialize = serializerFor(doc, routes.find((r) => r.operationId === 'listTransactions')!, true);
    const row = componentSerializer(doc, 'Transaction', true);
    for (const page of [
      { data: [offramp, onramp], has_more: true, next_cursor: 'eyJ0IjoiMjAyNi0xMS0zMFQwMDowMDowMC4wMDAwMDBaIn0' },
      { data: [onramp], has_more: false, next_cursor: null },
      { data: [], has_more: false, next_cursor: null },
    ]) {
      const rendered = new RenderedPage({ ...page, data: page.data.map((item) => Buffer.from(row(item))) });
      expect(renderedBytes(serialize, 200, rendered)!.toString()).to.equal(serialize(200, page));
    }
    expect(renderedBytes(serialize, 200, new Rendered(Buffer.from('{"a":1}')))!.toString()).to.equal('{"a":1}');
    expect(renderedBytes(serialize, 200, { data: [] })).to.equal(undefined);
  });
});
