import { expect } from 'chai';
import fc from 'fast-check';
import { parseDate, parseTimestamptz } from '../../shared/db/timestamps.js';

const same = (text: string) => {
  const ours = parseTimestamptz(text);
  const pgs = parseDate(text);
  expect(ours instanceof Date ? ours.getTime() : ours, text).to.deep.equal(pgs instanceof Date ? pgs.getTime() : pgs);
};

describe('timestamps read by their digits (shared/db/timestamps.ts)', () => {
  it('reads every UTC timestamptz PostgreSQL writes as the same instant as pg\'s own parser', () => {
    const pad = (v: number, n: number) => String(v).padStart(n, '0');
    fc.assert(fc.property(
      fc.integer({ min: 1000, max: 9999 }), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 28 }),
      fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 }), fc.integer({ min: 0, max: 59 }), fc.stringMatching(/^[0-9]{0,6}$/),
      (y, mo, d, h, mi, s, frac) => same(`${pad(y, 4)}-${pad(mo, 2)}-${pad(d, 2)} ${pad(h, 2)}:${pad(mi, 2)}:${pad(s, 2)}${frac ? `.${frac}` : ''}+00`),
    ), { numRuns: 20_000 });
    // Every fraction of a second PostgreSQL can write, to the microsecond, trailing zeros trimmed as it trims them.
    for (let us = 0; us < 1_000_000; us += 7) same(`2026-11-29 20:59:44.${String(us).padStart(6, '0').replace(/0+$/, '') || '0'}+00`);
  });

  it('leaves every other form to pg\'s parser: another zone, an early or five-digit year, BC, infinity, what is not a timestamp', () => {
    for (const text of ['2026-11-29 21:59:44.5+01', '2026-11-29 15:29:44-05:30', '0099-01-01 00:00:00+00', '0999-12-31 23:59:59.999+00',
      '12026-01-01 00:00:00+00', '2026-01-01 00:00:00+00 BC', 'infinity', '-infinity', '2026-1x-29 20:59:44+00', '2026-11-29 20:59:44.+00',
      '2026-11-29 20:59:44.1234567+00', '2026-11-29']) same(text);
  });
});
