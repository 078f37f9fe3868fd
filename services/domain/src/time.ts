/**
 * Calendar arithmetic for dates and datetimes, by hand because the domain may not read the clock and so
 * does not use the `Date` global at all (the lint fence bans it). Days from the civil calendar after
 * H. Hinnant, "chrono-compatible low-level date algorithms".
 */
const MS_PER_DAY = 86_400_000;

export function isLeapYear(y: number): boolean {
  return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
}

export function daysInMonth(y: number, m: number): number {
  return m === 2 ? (isLeapYear(y) ? 29 : 28) : [4, 6, 9, 11].includes(m) ? 30 : 31;
}

export function daysFromCivil(y: number, m: number, d: number): number {
  const yy = m <= 2 ? y - 1 : y;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

export function civilFromDays(z: number): [number, number, number] {
  const zz = z + 719468;
  const era = Math.floor(zz / 146097);
  const doe = zz - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp + (mp < 10 ? 3 : -9);
  return [yoe + era * 400 + (m <= 2 ? 1 : 0), m, d];
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
// YYYY-MM-DDThh:mm[:ss[.fff…]][Z|±hh[:mm]]; no offset reads as UTC (DECISIONS.md → Records).
const DATETIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?([Zz]|[+-]\d{2}(?::?\d{2})?)?$/;

/** True when `s` is `YYYY-MM-DD` and a real calendar date. */
export function isCalendarDate(s: string): boolean {
  const m = DATE.exec(s);
  if (m === null) return false;
  const y = Number(m[1]);
  const mo = Number(m[2]);
  const d = Number(m[3]);
  return mo >= 1 && mo <= 12 && d >= 1 && d <= daysInMonth(y, mo);
}

const pad = (n: number, w: number): string => String(n).padStart(w, '0');

/** Milliseconds since the epoch as `YYYY-MM-DDThh:mm:ss.sssZ`. */
export function formatUtcMillis(ms: number): string {
  const days = Math.floor(ms / MS_PER_DAY);
  let rest = ms - days * MS_PER_DAY;
  const [y, mo, d] = civilFromDays(days);
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const mi = Math.floor(rest / 60_000);
  rest -= mi * 60_000;
  const s = Math.floor(rest / 1000);
  const msPart = rest - s * 1000;
  return `${pad(y, 4)}-${pad(mo, 2)}-${pad(d, 2)}T${pad(h, 2)}:${pad(mi, 2)}:${pad(s, 2)}.${pad(msPart, 3)}Z`;
}

/**
 * Parses an ISO 8601 date-time into epoch milliseconds (fraction truncated to the millisecond, which is
 * the precision the spec matches timestamps at). Undefined when malformed or not a real instant.
 */
export function parseDateTimeMillis(s: string): number | undefined {
  const m = DATETIME.exec(s);
  if (m === null) return undefined;
  const y = Number(m[1]);
  const mo = Number(m[2]);
  const d = Number(m[3]);
  const h = Number(m[4]);
  const mi = Number(m[5]);
  const sec = m[6] === undefined ? 0 : Number(m[6]);
  const frac = m[7] === undefined ? 0 : Number((m[7] + '00').slice(0, 3));
  if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo) || h > 23 || mi > 59 || sec > 59) return undefined;
  let offsetMin = 0;
  const tz = m[8];
  if (tz !== undefined && tz !== 'Z' && tz !== 'z') {
    const digits = tz.slice(1).replace(':', '');
    const oh = Number(digits.slice(0, 2));
    const om = digits.length > 2 ? Number(digits.slice(2, 4)) : 0;
    if (oh > 23 || om > 59) return undefined;
    offsetMin = (tz.startsWith('-') ? -1 : 1) * (oh * 60 + om);
  }
  const ms = daysFromCivil(y, mo, d) * MS_PER_DAY + ((h * 60 + mi - offsetMin) * 60 + sec) * 1000 + frac;
  // Keep the normalised form inside four-digit years so string order stays time order.
  if (ms < MIN_MS || ms > MAX_MS) return undefined;
  return ms;
}

const MIN_MS = daysFromCivil(0, 1, 1) * MS_PER_DAY;
const MAX_MS = daysFromCivil(10000, 1, 1) * MS_PER_DAY - 1;
