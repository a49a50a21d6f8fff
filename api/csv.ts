import type { Response } from 'express';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { stringify } from 'csv-stringify';

/** What a spreadsheet reads as the start of a formula (ASCII and full-width), or as a cell to run (tab, CR). */
const FORMULA_START = /^[=+\-@\t\r\uFF1D\uFF0B\uFF0D\uFF20]/;

/** OWASP's CSV injection advice: a quote before a formula-like text makes it text again. */
export function formulaSafe(text: string): string {
  return FORMULA_START.test(text) ? `'${text}` : text;
}

/**
 * An export (Accept: text/csv): RFC 4180 rows streamed as they are read, a header first; nulls are empty fields.
 * Only the `text` columns are made formula-safe: a signed amount ("-5.00") must stay a number.
 */
export async function sendCsv(res: Response, csv: { columns: readonly string[]; text: readonly string[] }, rows: AsyncIterable<Record<string, unknown>>): Promise<void> {
  const text = new Set(csv.text);
  res.status(200).type('text/csv; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  const stringifier = stringify({
    header: true,
    columns: [...csv.columns],
    record_delimiter: 'windows',
    cast: { date: (d) => d.toISOString(), string: (value, context) => (text.has(String(context.column)) ? formulaSafe(value) : value) },
  });
  await pipeline(Readable.from(rows), stringifier, res);
}
