// Rows rendered once per version. For a read of transactions, building each row's view and serializing it cost the
// web process more than anything else it did (docs/performance.md): clients that poll read the same rows again and
// again, and got the same text each time. Each row's text is kept by its id beside its version (shared/db/row-version.ts:
// PostgreSQL's `xmin`, the transaction that wrote the row version the read saw, with its updated_at): every update
// writes a new version with a new xmin, so a read that sees another version renders it again. The database is still
// asked on every request; nothing is answered that the request's own read did not just see, only its text is not
// built twice.
import type { DataSource, EntityManager } from 'typeorm';
import { Lru } from '../shared/lru.js';
import { listPage, type ListSpec, type Page, type PageQuery } from '../shared/db/pagination.js';
import { planOnce } from '../shared/db/prepared-client.js';
import { rowVersion } from '../shared/db/row-version.js';
import type { Serialize } from './openapi/serializers.js';

/** Rows kept per cache: a transaction's text is 1 to 2 KB. */
const CAPACITY = 5_000;
/**
 * xmin is a 32-bit transaction id and comes round after 2^32 transactions: an entry is trusted for at most ten
 * minutes, far less than any server takes to go round, so an old text can never pass for a newer version.
 */
const MAX_AGE_MS = 10 * 60_000;

interface Entry {
  version: string;
  bytes: Buffer;
  at: number;
}

/** A text's UTF-8 bytes in memory of their own: a small Buffer.from shares an 8 KB slab, which one kept row would hold. */
function ownBytes(text: string): Buffer {
  const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
  bytes.write(text);
  return bytes;
}

/**
 * One kind of row's texts (a page's transactions; a transaction with its settlement), each serialized by its
 * component schema's serializer, so only declared fields leave, as from any answer, and kept as UTF-8 bytes, which
 * an answer copies as they are. A version a read sees is a committed one (a transaction that wrote a row twice shows
 * only its last version), so (id, version) names one text.
 */
export class RenderedRows {
  private readonly entries = new Lru<string, Entry>(CAPACITY);

  constructor(private readonly serialize: (value: unknown) => string) {}

  /** The text kept for this version of the row, if it was rendered within MAX_AGE_MS. */
  kept(id: string, version: string): Buffer | undefined {
    const kept = this.entries.get(id);
    return kept !== undefined && kept.version === version && Date.now() - kept.at < MAX_AGE_MS ? kept.bytes : undefined;
  }

  /** The row's text: kept, when the version its read saw was rendered before; else rendered by `view` and kept. */
  bytes<R extends { id: string }>(row: R, version: string, view: (row: R) => unknown): Buffer {
    const kept = this.kept(row.id, version);
    if (kept !== undefined) return kept;
    const bytes = ownBytes(this.serialize(view(row)));
    this.entries.set(row.id, { version, bytes, at: Date.now() });
    return bytes;
  }
}

/**
 * A list whose rows are rendered once per version: the ListSpec of its full rows, and the table the page is found in.
 * Its conditions (the scope first, then any filter) name the listed table's alias alone: both reads apply them.
 */
export interface RenderedList<R> extends ListSpec {
  /** The listed table with its alias (`customers c`): the rows' ids and versions are read from it alone. */
  table: string;
  view: (row: R) => unknown;
}

/**
 * A page of a list rendered once per row version, read in two steps. First the page's ids and versions, from the
 * listed table alone (its list index and 26 rows, none of their columns); every row whose version was rendered before
 * is its kept text. Then the rows not kept, by id under the same conditions (scope and filters), with every column
 * their view reads, each rendered from that second read and kept under the version it saw. A client that polls a page
 * reads ids and versions only. A row's view must depend on its own row alone (a customer's managed wallet moves its
 * customer's version: migration 1764900000000). A row that no longer matches the conditions when read again (its
 * status moved out of a status filter meanwhile) is left out, so such a page may hold fewer rows than asked; its
 * cursor is the first read's and goes on where that read stopped.
 */
export async function renderedPage<R extends { id: string }>(
  db: DataSource | EntityManager,
  list: RenderedList<R>,
  query: PageQuery,
  texts: RenderedRows,
): Promise<RenderedPage> {
  const version = rowVersion(list.alias);
  const page = await listPage<{ id: string; cursor_ts: string; row_version: string }, { id: string; kept: Buffer | undefined }>(
    db, { ...list, columns: `${list.alias}.id, ${version} AS row_version`, from: list.table }, query,
    (row) => ({ id: row.id, kept: texts.kept(row.id, row.row_version) }),
  );
  const missing = page.data.filter((row) => row.kept === undefined).map((row) => row.id);
  const read = new Map<string, R & { row_version: string }>();
  if (missing.length > 0) {
    // The ids are the last parameter, after the list's own; its conditions are a filter (`IS TRUE`), so every plan
    // finds the rows by primary key (prepared-client.ts).
    const ids = list.params.length + 1;
    const rows: (R & { row_version: string })[] = await db.query(
      planOnce(`SELECT ${list.columns}, ${version} AS row_version FROM ${list.from} WHERE ${list.alias}.id = ANY($${ids}::uuid[]) AND (${list.where.join(' AND ')}) IS TRUE`),
      [...list.params, missing],
    );
    for (const row of rows) read.set(row.id, row);
  }
  const data: Buffer[] = [];
  for (const { id, kept } of page.data) {
    const row = kept === undefined ? read.get(id) : undefined;
    if (kept !== undefined) data.push(kept);
    else if (row !== undefined) data.push(texts.bytes(row, row.row_version, list.view));
  }
  return new RenderedPage({ ...page, data });
}

/** An answer already serialized by its schema's serializer (RenderedRows): sent as it is. */
export class Rendered {
  constructor(readonly bytes: Buffer) {}
}

const COMMA = Buffer.from(',');

/** A page whose rows are texts (RenderedRows): its envelope is serialized by the operation's serializer, the rows put in. */
export class RenderedPage {
  constructor(readonly page: Page<Buffer>) {}

  serializeWith(serialize: Serialize, status: number): Buffer {
    const envelope = serialize(status, { ...this.page, data: [] });
    // `"data":[]` can only be the data property: a string value holding it would hold escaped quotes.
    const at = envelope.indexOf('"data":[]');
    if (at < 0) throw new Error('a rendered page\'s envelope has no empty data array');
    const parts: Buffer[] = [Buffer.from(envelope.slice(0, at + 8))];
    for (let i = 0; i < this.page.data.length; i++) {
      if (i > 0) parts.push(COMMA);
      parts.push(this.page.data[i]);
    }
    parts.push(Buffer.from(envelope.slice(at + 8)));
    return Buffer.concat(parts);
  }
}

/** The bytes of an answer whose body was rendered beforehand; undefined for any other body. */
export function renderedBytes(serialize: Serialize | undefined, status: number, body: unknown): Buffer | undefined {
  if (body instanceof Rendered) return body.bytes;
  if (body instanceof RenderedPage) return body.serializeWith(serialize ?? ((_s, v) => JSON.stringify(v)), status);
  return undefined;
}
