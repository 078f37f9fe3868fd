import { DomainError, parseJsonBody } from '../src';

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
});
