import fc from 'fast-check';
import { DomainError } from '@pushbase/domain';
import { accountLiteral, checkAccount, datasetLiteral, quoteIdentifier, quoteString } from '../src/sql';

/** Reads a ClickHouse string literal back the way its parser does (the escapes quoteString may emit). */
function unquote(literal: string): string {
  expect(literal.startsWith("'") && literal.endsWith("'")).toBe(true);
  const body = literal.slice(1, -1);
  let out = '';
  for (let i = 0; i < body.length; i++) {
    const c = body[i] as string;
    if (c === "'") throw new Error(`an unescaped quote at ${i} would end the literal: ${literal}`);
    if (c !== '\\') {
      out += c;
      continue;
    }
    const e = body[++i];
    if (e === 'x') {
      out += String.fromCharCode(parseInt(body.slice(i + 1, i + 3), 16));
      i += 2;
    } else if (e === "'" || e === '\\') out += e;
    else throw new Error(`unexpected escape \\${e} in ${literal}`);
  }
  return out;
}

const ADVERSARIAL = [
  '',
  "'",
  "''",
  "\\'",
  '\\',
  '\\\\',
  "a' OR 1=1 --",
  "x'); DROP DATABASE default; --",
  '\u0000',
  'a\u0000b',
  '\n',
  '\r\n',
  '\t',
  '\u001b[31m',
  '\u007f',
  '`',
  '"',
  '\u2028\u2029',
  'é',
  '日本語',
  '😀',
  '𝄞 music',
  '\u{10ffff}',
  '\ufeff',
  'x'.repeat(100),
  `${"'\\".repeat(50)}`,
];

describe('quoteString', () => {
  it.each(ADVERSARIAL.map((s) => [JSON.stringify(s), s]))('keeps %s exactly, on one line, without ending the literal early', (_name, s) => {
    const literal = quoteString(s);
    expect(unquote(literal)).toBe(s);
    expect([...literal].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f)).toBe(false);
  });

  it('escapes quote and backslash, and control characters as \\xHH', () => {
    expect(quoteString("it's")).toBe("'it\\'s'");
    expect(quoteString('a\\b')).toBe("'a\\\\b'");
    expect(quoteString('\u0000\n\u007f')).toBe("'\\x00\\x0a\\x7f'");
    expect(quoteString('😀')).toBe("'😀'");
  });

  it('round-trips any well-formed string (property)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 120 }), (s) => {
        expect(unquote(quoteString(s))).toBe(s);
      }),
      { numRuns: 2000 },
    );
  });

  it.each([['\ud800'], ['a\udc00'], ['\udbff\u0041'], ['x\ud83d']])('refuses a lone surrogate (%j): it has no UTF-8 form', (s) => {
    expect(() => quoteString(s)).toThrow(DomainError);
  });
});

describe('quoteIdentifier', () => {
  it.each([['pushbase'], ['pb_test_0a1b'], ['_x'], ['default'], ['A'.repeat(63)]])('backquotes %s', (name) => {
    expect(quoteIdentifier(name)).toBe(`\`${name}\``);
  });

  it.each([[''], ['1abc'], ['a-b'], ['a.b'], ['a b'], ['a`b'], ["a'b"], ['a\u0000'], ['é'], ['A'.repeat(64)], ['x;DROP'], ['db`.`t']])(
    'refuses %j',
    (name) => {
      expect(() => quoteIdentifier(name)).toThrow(DomainError);
    },
  );
});

describe('ids before SQL', () => {
  it('accepts accounts of the key store and 100-character dataset ids', () => {
    const id = `a${'.b_c-d'.repeat(16)}${'z'.repeat(3)}`;
    expect(id).toHaveLength(100);
    expect(datasetLiteral(id)).toBe(`'${id}'`);
    expect(accountLiteral('Team_1.eu-west')).toBe("'Team_1.eu-west'");
    expect(checkAccount('A'.repeat(100))).toBe('A'.repeat(100));
  });

  it.each([[''], ['a b'], ["o'brien"], ['a\\b'], ['a\u0000'], ['ü'], ['😀'], ['A'.repeat(101)], ['x/y']])('refuses the account %j', (account) => {
    expect(() => accountLiteral(account)).toThrow(DomainError);
  });

  it.each([[''], ['Upper'], ["x'"], ['a\u0000'], ['-x'], ['x.'], ['a'.repeat(101)], ['😀'], ['a\\b']])('refuses the dataset id %j', (id) => {
    expect(() => datasetLiteral(id)).toThrow(DomainError);
  });
});
