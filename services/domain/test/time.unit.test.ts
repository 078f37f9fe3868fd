/* The calendar arithmetic of the domain (written without Date) checked against Date as an oracle. */
import fc from 'fast-check';
import { civilFromDays, daysFromCivil, daysInMonth, formatUtcMillis, isLeapYear, normaliseDateTime, parseDateTimeMillis } from '../src';

const DAY_MS = 86_400_000;
const oracleDays = (y: number, m: number, d: number): number => {
  const t = new Date(0);
  t.setUTCFullYear(y, m - 1, d);
  return t.getTime() / DAY_MS;
};

describe('calendar arithmetic', () => {
  it.each([
    [2024, true],
    [2023, false],
    [2000, true],
    [1900, false],
    [2100, false],
    [1600, true],
    [0, true],
  ])('isLeapYear(%i) is %p', (y, leap) => {
    expect(isLeapYear(y)).toBe(leap);
    expect(daysInMonth(y, 2)).toBe(leap ? 29 : 28);
  });

  it('daysInMonth matches the calendar', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12].map((m) => daysInMonth(2023, m))).toStrictEqual([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]);
  });

  it('daysFromCivil counts days from 1970-01-01 as Date does, and civilFromDays inverts it', () => {
    fc.assert(
      fc.property(fc.integer({ min: -1000, max: 12000 }), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 31 }), (y, m, d0) => {
        const d = Math.min(d0, daysInMonth(y, m));
        const days = daysFromCivil(y, m, d);
        expect(days).toBe(oracleDays(y, m, d));
        expect(civilFromDays(days)).toStrictEqual([y, m, d]);
      }),
      { numRuns: 300 },
    );
  });

  // Hinnant's algorithm counts in 400-year eras starting 1 March; each era's last day is a 29 February.
  it.each([
    [2000, 2, 29],
    [2000, 3, 1],
    [1600, 2, 29],
    [2400, 2, 29],
    [0, 2, 29],
    [0, 3, 1],
    [1999, 12, 31],
    [2100, 2, 28],
    [2100, 3, 1],
    [1970, 1, 1],
    [9999, 12, 31],
  ])('maps %i-%i-%i to days and back, at the edges of an era and a century', (y, m, d) => {
    expect(daysFromCivil(y, m, d)).toBe(oracleDays(y, m, d));
    expect(civilFromDays(oracleDays(y, m, d))).toStrictEqual([y, m, d]);
    const iso = `${String(y).padStart(4, '0')}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}T23:59:59.999Z`;
    expect(formatUtcMillis(oracleDays(y, m, d) * DAY_MS + DAY_MS - 1)).toBe(iso);
  });

  it('keeps normalised datetimes within four-digit years', () => {
    expect(parseDateTimeMillis('0000-01-01T00:00:00Z')).toBe(oracleDays(0, 1, 1) * DAY_MS);
    expect(parseDateTimeMillis('9999-12-31T23:59:59.999Z')).toBe(oracleDays(9999, 12, 31) * DAY_MS + DAY_MS - 1);
    expect(parseDateTimeMillis('0000-01-01T00:00:00+00:01')).toBeUndefined();
    expect(parseDateTimeMillis('9999-12-31T23:59:59-00:01')).toBeUndefined();
    // The same edges reached through an offset: the last and first representable milliseconds, and one past.
    expect(parseDateTimeMillis('9999-12-31T22:59:59.999-01:00')).toBe(oracleDays(9999, 12, 31) * DAY_MS + DAY_MS - 1);
    expect(parseDateTimeMillis('9999-12-31T23:00:00.000-01:00')).toBeUndefined();
    expect(parseDateTimeMillis('0000-01-01T01:00:00+01:00')).toBe(oracleDays(0, 1, 1) * DAY_MS);
    expect(parseDateTimeMillis('0000-01-01T00:59:59.999+01:00')).toBeUndefined();
  });
});

describe('normaliseDateTime (the fast path used on every record)', () => {
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  const datetime = fc
    .record({
      y: fc.integer({ min: 0, max: 9999 }),
      mo: fc.integer({ min: 1, max: 13 }),
      d: fc.integer({ min: 1, max: 31 }),
      sep: fc.constantFrom('T', 't', ' '),
      h: fc.integer({ min: 0, max: 24 }),
      mi: fc.integer({ min: 0, max: 60 }),
      sec: fc.option(fc.integer({ min: 0, max: 60 })),
      frac: fc.option(fc.stringMatching(/^[0-9]{1,7}$/)),
      tz: fc.constantFrom('', 'Z', 'z', '+00:00', '-00:00', '+05:30', '-0800', '+14', '-23:59', '+24:00'),
    })
    .map(({ y, mo, d, sep, h, mi, sec, frac, tz }) => {
      const time = sec === null ? `${pad(h)}:${pad(mi)}` : `${pad(h)}:${pad(mi)}:${pad(sec)}${frac === null ? '' : `.${frac}`}`;
      return `${pad(y, 4)}-${pad(mo)}-${pad(d)}${sep}${time}${tz}`;
    });

  it('equals formatUtcMillis(parseDateTimeMillis(s)) for valid and invalid input alike', () => {
    fc.assert(
      fc.property(fc.oneof(datetime, fc.string()), (s) => {
        const ms = parseDateTimeMillis(s);
        expect(normaliseDateTime(s)).toBe(ms === undefined ? undefined : formatUtcMillis(ms));
      }),
      { numRuns: 3000 },
    );
  });

  it('returns canonical input unchanged and fills in what UTC input leaves out', () => {
    const canonical = '2024-02-29T23:59:59.999Z';
    expect(normaliseDateTime(canonical)).toBe(canonical);
    expect(normaliseDateTime('2024-02-29T23:59Z')).toBe('2024-02-29T23:59:00.000Z');
    expect(normaliseDateTime('2024-02-29 23:59:59,5+00:00')).toBe('2024-02-29T23:59:59.500Z');
    expect(normaliseDateTime('2024-03-01T01:00:00+02:00')).toBe('2024-02-29T23:00:00.000Z');
    expect(normaliseDateTime('0000-01-01T00:30:00+01:00')).toBeUndefined();
    expect(normaliseDateTime('2023-02-29T00:00:00Z')).toBeUndefined();
    expect(normaliseDateTime('2000-03-01T00:30:00+01:00')).toBe('2000-02-29T23:30:00.000Z');
    expect(normaliseDateTime('9999-12-31T22:59:59.999-01:00')).toBe('9999-12-31T23:59:59.999Z');
    expect(normaliseDateTime('9999-12-31T23:00:00-01:00')).toBeUndefined();
    expect(normaliseDateTime('0000-01-01T01:00:00+01:00')).toBe('0000-01-01T00:00:00.000Z');
  });

  it('returns the canonical string itself only when it is canonical: T, a dot, three digits and Z', () => {
    for (const s of ['2024-01-31t12:00:00.000Z', '2024-01-31 12:00:00.000Z', '2024-01-31T12:00:00,000Z', '2024-01-31T12:00:00.000z']) {
      expect(normaliseDateTime(s)).toBe('2024-01-31T12:00:00.000Z');
    }
    expect(normaliseDateTime('2024-01-31T12:00:00.0000')).toBe('2024-01-31T12:00:00.000Z');
  });
});
