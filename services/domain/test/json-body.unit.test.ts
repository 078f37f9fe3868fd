import { DomainError, LIMITS, parseJsonBody } from '../src';

/* A request body is parsed the same from bytes (append, replace: the record service, maybe in a worker) and from text. */

const BOM = [0xef, 0xbb, 0xbf];
const bytes = (text: string, bom = false): Uint8Array => Uint8Array.from([...(bom ? BOM : []), ...new TextEncoder().encode(text)]);
const refusal = (body: string | Uint8Array): unknown => {
  try {
    parseJsonBody(body);
  } catch (e: unknown) {
    return e instanceof DomainError ? { code: e.code, message: e.message } : e;
  }
  return 'accepted';
};

describe('parseJsonBody', () => {
  it.each([
    ['an object', '{"data":[{"n":1}]}', { data: [{ n: 1 }] }],
    ['non-ASCII text', '{"s":"Zürich €"}', { s: 'Zürich €' }],
    ['JSON with surrounding whitespace', ' \r\n{"a":1}\t', { a: 1 }],
  ])('parses %s from bytes and from text alike, with or without a leading byte-order mark', (_name, text, expected) => {
    expect(parseJsonBody(bytes(text))).toEqual(expected);
    expect(parseJsonBody(bytes(text, true))).toEqual(expected);
    expect(parseJsonBody(text)).toEqual(expected);
    expect(parseJsonBody(`\uFEFF${text}`)).toEqual(expected);
  });

  it('reads an empty body, or a byte-order mark alone, as absent', () => {
    expect(parseJsonBody(new Uint8Array(0))).toBeUndefined();
    expect(parseJsonBody(Uint8Array.from(BOM))).toBeUndefined();
    expect(parseJsonBody('\uFEFF')).toBeUndefined();
    expect(parseJsonBody('  ')).toBeUndefined();
  });

  it.each([
    ['a mark after whitespace', ' \uFEFF{}'],
    ['two marks', '\uFEFF\uFEFF{}'],
    ['a mark inside the value', '{"a":\uFEFF1}'],
    ['invalid JSON after a mark', '\uFEFF{"data": ['],
  ])('refuses %s as invalid JSON, from bytes and from text alike', (_name, text) => {
    const expected = { code: 'invalid', message: expect.stringMatching(/^The request body is not valid JSON: /) };
    expect(refusal(text)).toEqual(expected);
    expect(refusal(new TextEncoder().encode(text))).toEqual(expected);
  });

  // JSON.parse takes a million levels; JSON.stringify of the result (the gateway forwarding a definition
  // over gRPC) overflowed the stack: a 500 in one mode, a 201 in the other.
  const nested = (levels: number, inner = '1'): string => `${'['.repeat(levels)}${inner}${']'.repeat(levels)}`;

  it.each([
    ['arrays', nested(LIMITS.jsonDepth)],
    ['objects', `${'{"a":'.repeat(LIMITS.jsonDepth)}1${'}'.repeat(LIMITS.jsonDepth)}`],
    ['a definition echoing what it was sent', '{"fields":{"a":{"type":"number","name":"A"}},"unique_by":["a"],"extra":[{"x":[]}]}'],
  ])('takes %s nested up to the limit', (_name, text) => {
    expect(refusal(text)).toBe('accepted');
  });

  it.each([
    ['arrays one level past the limit', nested(LIMITS.jsonDepth + 1)],
    ['objects one level past the limit', `${'{"a":'.repeat(LIMITS.jsonDepth + 1)}1${'}'.repeat(LIMITS.jsonDepth + 1)}`],
    ['a definition a million levels deep', `{"fields":${nested(1_000_000, '')}}`],
    ['records a million levels deep', `{"data":[{"a":${nested(1_000_000)}}]}`],
    ['an ignored key a million levels deep beside a valid definition', `{"fields":{"a":{"type":"number","name":"A"}},"x":${nested(1_000_000)}}`],
  ])('refuses %s as invalid, from bytes and from text alike', (_name, text) => {
    const expected = { code: 'invalid', message: `The request body nests arrays and objects more than ${LIMITS.jsonDepth} levels deep; a valid body needs at most 3` };
    expect(refusal(text)).toEqual(expected);
    expect(refusal(new TextEncoder().encode(text))).toEqual(expected);
  });
});
