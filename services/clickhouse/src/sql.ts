import { invalid, parseDatasetId } from '@pushbase/domain';

/*
 * The one place where values meet SQL text. ClickHouse 18.16 has no query parameters, so the few values a
 * read must name (an account, a dataset id) are validated against their pattern first and then written as
 * string literals by `quoteString`; user values of records only ever travel in INSERT bodies (RowBinary for the records table, JSONEachRow for heads).
 * Identifiers (database names) are validated against a strict pattern and backquoted.
 */

/** Database and table names: ASCII letters, digits and `_`, not starting with a digit, at most 63 characters. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** An account as the key store allows it (gateway keys.ts: 1–100 of A-Z a-z 0-9 . _ -). */
const ACCOUNT = /^[A-Za-z0-9._-]{1,100}$/;

const HEX = '0123456789abcdef';

/**
 * A ClickHouse string literal holding exactly `value`. Quote and backslash are escaped; every control
 * character (NUL, newline, tab, DEL, …) becomes `\xHH`, so the SQL text stays on one line and no byte of
 * it can end the literal early. Characters from U+0080 on are sent as their UTF-8 bytes, which ClickHouse
 * compares byte for byte. A lone surrogate has no UTF-8 form (it would silently become U+FFFD and the
 * literal would no longer hold `value`), so it is refused.
 */
export function quoteString(value: string): string {
  let out = "'";
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 0x27) out += "\\'";
    else if (c === 0x5c) out += '\\\\';
    else if (c < 0x20 || c === 0x7f) out += `\\x${HEX[c >> 4] as string}${HEX[c & 15] as string}`;
    else if (c >= 0xd800 && c <= 0xdfff) {
      const next = value.charCodeAt(i + 1);
      if (c > 0xdbff || !(next >= 0xdc00 && next <= 0xdfff)) {
        throw invalid(`A value for SQL holds a lone surrogate (U+${c.toString(16).toUpperCase()}) at ${i}; it has no UTF-8 form`);
      }
      out += value[i] as string;
      out += value[++i] as string;
    } else out += value[i] as string;
  }
  return `${out}'`;
}

/** Throws unless `name` can name a ClickHouse database or table here; returns it backquoted. */
export function quoteIdentifier(name: string): string {
  if (!IDENTIFIER.test(name)) {
    throw invalid(`"${name.slice(0, 80)}" is not a usable ClickHouse name: use 1 to 63 of A-Z a-z 0-9 _, not starting with a digit`);
  }
  // Backquotes although the pattern allows no special character: a name may still be a keyword (`default`).
  return `\`${name}\``;
}

export const isIdentifier = (name: string): boolean => IDENTIFIER.test(name);

/** Validates an account before it gets near SQL; returns it. */
export function checkAccount(account: string): string {
  if (!ACCOUNT.test(account)) throw invalid(`Invalid account "${account.slice(0, 120)}": use 1 to 100 of A-Z a-z 0-9 . _ -`, 'account');
  return account;
}

/** The SQL literal of a validated account. */
export const accountLiteral = (account: string): string => quoteString(checkAccount(account));

/** The SQL literal of a validated dataset id (docs/api.md → Routes). */
export const datasetLiteral = (id: string): string => quoteString(parseDatasetId(id));
