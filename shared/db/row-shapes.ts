import pg from 'pg';

/**
 * pg builds, for every result, an empty row to copy each row from: an object with every column set to null, made by
 * spreading an `Object.create(null)` dictionary. For our wide reads (a transaction with its settlement: 65 columns)
 * that spread was the most expensive thing the web process did for a read by id (7.5% of its CPU, 12 µs a query),
 * though the same statement returns the same columns every time. Here each distinct list of column names gets its
 * empty row once, built the way pg builds it (a spread of a dictionary gives an object V8 copies fast; one grown key
 * by key does not), and every later result with those columns reuses it. Rows are copied from it, never written to,
 * so sharing it changes nothing a row holds.
 *
 * At most MAX_SHAPES lists are kept (our statements have a few hundred); past that a result builds its own, as pg does.
 */
const MAX_SHAPES = 5_000;

type Field = { name: string; dataTypeID: number; format?: string };
type TypeParsers = { getTypeParser(oid: number, format: string): (value: string) => unknown };
type ResultInternals = {
  fields: Field[];
  _parsers: Array<(value: string) => unknown> | undefined;
  _types: TypeParsers | undefined;
  _prebuiltEmptyResultObject: Record<string, null> | null;
};

const shapes = new Map<string, Record<string, null>>();

/** The empty row for these columns, as pg builds it, kept once per list of names. */
function emptyRow(fields: Field[]): Record<string, null> {
  let key = '';
  for (let i = 0; i < fields.length; i++) key += `${fields[i].name}\u0000`;
  let row = shapes.get(key);
  if (row === undefined) {
    const dictionary = Object.create(null) as Record<string, null>;
    for (let i = 0; i < fields.length; i++) dictionary[fields[i].name] = null;
    row = { ...dictionary };
    if (shapes.size < MAX_SHAPES) shapes.set(key, row);
  }
  return row;
}

let installed = false;

const resultPrototype = () => (pg as unknown as { Result: { prototype: Record<string, unknown> } }).Result.prototype;

/** pg's row parsing still copies each row from `_prebuiltEmptyResultObject` (what the shared shape replaces). */
export function rowShapesMatchPg(): boolean {
  return String(resultPrototype().parseRow).includes('_prebuiltEmptyResultObject');
}

/**
 * Replaces pg's `Result.addFields` with one that reuses each column list's empty row, and otherwise does what pg 8's
 * does (fields, one parser per column, the empty row). Only while pg still parses rows that way (a later pg that does
 * not is left alone: the test then fails, so we notice). Answers whether it is installed.
 */
export function shareRowShapes(): boolean {
  if (installed || !rowShapesMatchPg()) return installed;
  installed = true;
  const proto = resultPrototype();
  proto.addFields = function addFields(this: ResultInternals, fieldDescriptions: Field[]): void {
    this.fields = fieldDescriptions;
    const n = fieldDescriptions.length;
    const parsers = new Array<(value: string) => unknown>(n);
    const types = this._types ?? (pg.types as unknown as TypeParsers);
    for (let i = 0; i < n; i++) parsers[i] = types.getTypeParser(fieldDescriptions[i].dataTypeID, fieldDescriptions[i].format || 'text');
    if (n > 0) this._parsers = parsers;
    this._prebuiltEmptyResultObject = emptyRow(fieldDescriptions);
  };
  return true;
}
