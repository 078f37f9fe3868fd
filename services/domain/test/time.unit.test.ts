/* The calendar arithmetic of the domain (written without Date) checked against Date as an oracle. */
import fc from 'fast-check';
import { civilFromDays, daysFromCivil, daysInMonth, isLeapYear, parseDateTimeMillis } from '../src';

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

  it('keeps normalised datetimes within four-digit years', () => {
    expect(parseDateTimeMillis('0000-01-01T00:00:00Z')).toBe(oracleDays(0, 1, 1) * DAY_MS);
    expect(parseDateTimeMillis('9999-12-31T23:59:59.999Z')).toBe(oracleDays(9999, 12, 31) * DAY_MS + DAY_MS - 1);
    expect(parseDateTimeMillis('0000-01-01T00:00:00+00:01')).toBeUndefined();
    expect(parseDateTimeMillis('9999-12-31T23:59:59-00:01')).toBeUndefined();
  });
});
