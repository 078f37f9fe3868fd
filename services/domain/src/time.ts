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
  if (m === 2) return isLeapYear(y) ? 29 : 28;
  return m === 4 || m === 6 || m === 9 || m === 11 ? 30 : 31;
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

/*
 * Dates and datetimes are validated on every record of every request, so they are scanned by character
 * codes rather than by regular expressions: no match arrays, no number parsing of substrings, and the
 * common UTC forms are normalised without any calendar arithmetic. Grammar of a datetime:
 *   YYYY-MM-DD(T|t| )hh:mm[:ss[(.|,)f…]][Z|z|±hh:mm]   — no offset reads as UTC (docs/api.md → Fields and values).
 * Lower-case t and z, a space for the T and a decimal comma are the RFC 3339 and ISO 8601 variants real
 * clients write; they change nothing about the instant.
 */

/** Two decimal digits at `i`, or -1. */
function digits2(s: string, i: number): number {
  const a = s.charCodeAt(i) - 48;
  const b = s.charCodeAt(i + 1) - 48;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : -1;
}

function isRealDate(y: number, m: number, d: number): boolean {
  return m >= 1 && m <= 12 && d >= 1 && d <= daysInMonth(y, m);
}

/** Reads `YYYY-MM-DD` at the start of `s` into `out[0..2]`; false when malformed or not a real date. */
function scanDate(s: string, out: number[]): boolean {
  const hi = digits2(s, 0);
  const lo = digits2(s, 2);
  if (hi < 0 || lo < 0 || s.charCodeAt(4) !== 45 || s.charCodeAt(7) !== 45) return false;
  const y = hi * 100 + lo;
  const m = digits2(s, 5);
  const d = digits2(s, 8);
  out[0] = y;
  out[1] = m;
  out[2] = d;
  return isRealDate(y, m, d);
}

// Scratch for the scanner: y, mo, d, h, mi, s, ms, offset minutes. Reused; the domain is single-threaded
// per isolate and every use reads it right after filling it.
const parts = [0, 0, 0, 0, 0, 0, 0, 0];

/** True when `s` is `YYYY-MM-DD` and a real calendar date. */
export function isCalendarDate(s: string): boolean {
  return s.length === 10 && scanDate(s, parts);
}

/** Epoch milliseconds of a `YYYY-MM-DD` calendar date's midnight UTC; undefined when `s` is not one. */
export function parseDateMillis(s: string): number | undefined {
  if (!isCalendarDate(s)) return undefined;
  return daysFromCivil(parts[0] as number, parts[1] as number, parts[2] as number) * MS_PER_DAY;
}

function scanDateTime(s: string): boolean {
  // Past the end of `s` charCodeAt gives NaN, which no test below accepts: the scan needs no length checks.
  if (!scanDate(s, parts)) return false;
  const sep = s.charCodeAt(10);
  if (sep !== 84 && sep !== 116 && sep !== 32) return false; // T t space
  const h = digits2(s, 11);
  const mi = digits2(s, 14);
  if (h < 0 || h > 23 || s.charCodeAt(13) !== 58 || mi < 0 || mi > 59) return false;
  let i = 16;
  let sec = 0;
  let ms = 0;
  if (s.charCodeAt(i) === 58) {
    sec = digits2(s, i + 1);
    if (sec < 0 || sec > 59) return false;
    i += 3;
    const dot = s.charCodeAt(i);
    if (dot === 46 || dot === 44) {
      const start = ++i;
      while (s.charCodeAt(i) >= 48 && s.charCodeAt(i) <= 57) {
        // Milliseconds are the first three fraction digits; further digits are dropped, not rounded.
        if (i - start < 3) ms = ms * 10 + (s.charCodeAt(i) - 48);
        i++;
      }
      const len = i - start;
      if (len === 0) return false;
      if (len === 1) ms *= 100;
      else if (len === 2) ms *= 10;
    }
  }
  let offset = 0;
  const c = s.charCodeAt(i);
  if (c === 90 || c === 122) {
    i++; // Z z
  } else if (c === 43 || c === 45) {
    // Only ±hh:mm (docs/api.md → Fields and values): the shorter ISO 8601 forms ±hh and ±hhmm are refused.
    const oh = digits2(s, i + 1);
    const om = digits2(s, i + 4);
    if (oh < 0 || oh > 23 || s.charCodeAt(i + 3) !== 58 || om < 0 || om > 59) return false;
    i += 6;
    offset = (c === 45 ? -1 : 1) * (oh * 60 + om);
  }
  // Whatever else follows the time, or anything after the offset, is refused here.
  if (i !== s.length) return false;
  parts[3] = h;
  parts[4] = mi;
  parts[5] = sec;
  parts[6] = ms;
  parts[7] = offset;
  return true;
}

const PAD2 = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, '0'));
const PAD3 = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'));

function formatParts(y: number, mo: number, d: number, h: number, mi: number, s: number, ms: number): string {
  return `${PAD2[(y / 100) | 0] as string}${PAD2[y % 100] as string}-${PAD2[mo] as string}-${PAD2[d] as string}T${PAD2[h] as string}:${PAD2[mi] as string}:${PAD2[s] as string}.${PAD3[ms] as string}Z`;
}

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
  return formatParts(y, mo, d, h, mi, s, rest - s * 1000);
}

const toMillis = (): number => {
  const [y, mo, d, h, mi, sec, ms, offset] = parts as [number, number, number, number, number, number, number, number];
  return daysFromCivil(y, mo, d) * MS_PER_DAY + ((h * 60 + mi - offset) * 60 + sec) * 1000 + ms;
};

/**
 * Parses an ISO 8601 date-time into epoch milliseconds (fraction truncated to the millisecond, which is
 * the precision the spec matches timestamps at). Undefined when malformed or not a real instant.
 */
export function parseDateTimeMillis(s: string): number | undefined {
  if (!scanDateTime(s)) return undefined;
  const ms = toMillis();
  // Keep the normalised form inside four-digit years so string order stays time order.
  return ms < MIN_MS || ms > MAX_MS ? undefined : ms;
}

/**
 * The stored form of a datetime: UTC `YYYY-MM-DDThh:mm:ss.sssZ`, so string order is time order and equal
 * instants are equal strings. Undefined when `s` is not a valid date-time. Equal to
 * `formatUtcMillis(parseDateTimeMillis(s))`, faster for UTC input.
 */
export function normaliseDateTime(s: string): string | undefined {
  if (!scanDateTime(s)) return undefined;
  if (parts[7] === 0) {
    // Already canonical: return the very string, no allocation. The scan has checked the shape, so a T,
    // a dot at 19 and a Z at 23 can only be YYYY-MM-DDThh:mm:ss.sssZ.
    if (s.charCodeAt(10) === 84 && s.charCodeAt(19) === 46 && s.charCodeAt(23) === 90) return s;
    return formatParts(parts[0] as number, parts[1] as number, parts[2] as number, parts[3] as number, parts[4] as number, parts[5] as number, parts[6] as number);
  }
  const ms = toMillis();
  return ms < MIN_MS || ms > MAX_MS ? undefined : formatUtcMillis(ms);
}

const MIN_MS = daysFromCivil(0, 1, 1) * MS_PER_DAY;
const MAX_MS = daysFromCivil(10000, 1, 1) * MS_PER_DAY - 1;
