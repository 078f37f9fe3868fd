/** Whether `s` holds more than `max` Unicode code points (a lone surrogate counts as one). */
export function longerThan(s: string, max: number): boolean {
  // A fast path only (code points ≤ UTF-16 units): the loop below gives the same answer.
  if (s.length <= max) return false;
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    // A high surrogate and the low one after it are one code point; a lone one counts alone. (Past the end,
    // charCodeAt gives NaN, which is no low surrogate.)
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    n++;
    if (n > max) return true;
  }
  return false;
}

/**
 * What a string holding a lone surrogate (JSON's escape "\ud800" alone) must be instead. Such a string has
 * no UTF-8 form: wherever text is UTF-8 (ClickHouse, gRPC) it would become U+FFFD, and two distinct values
 * (unique keys, labels) one — so it is refused with `isWellFormed()` where a client's text is kept.
 */
export const NOT_WELL_FORMED = 'well-formed Unicode text, without a lone UTF-16 surrogate (such as "\\ud800")';
