import fc from 'fast-check';
import { RowBinaryWriter } from '../src/row-binary';

const bytes = (write: (w: RowBinaryWriter) => void, initial?: number): number[] => {
  const w = new RowBinaryWriter(initial);
  write(w);
  return [...w.bytes()];
};

describe('RowBinaryWriter', () => {
  it('writes a string as its UTF-8 byte length in LEB128, then the bytes, on both sides of the one-byte length', () => {
    expect(bytes((w) => w.string(''))).toStrictEqual([0]);
    expect(bytes((w) => w.string('é'))).toStrictEqual([2, 0xc3, 0xa9]);
    // 42 units of 3 bytes: the longest string the short path takes, 126 bytes.
    expect(bytes((w) => w.string('€'.repeat(42))).slice(0, 4)).toStrictEqual([126, 0xe2, 0x82, 0xac]);
    expect(bytes((w) => w.string('a'.repeat(127)))[0]).toBe(127);
    expect(bytes((w) => w.string('a'.repeat(128))).slice(0, 3)).toStrictEqual([0x80, 0x01, 0x61]);
    expect(bytes((w) => w.string('€'.repeat(43))).slice(0, 2)).toStrictEqual([129, 1]);
    expect(bytes((w) => w.string('x'.repeat(20_000))).slice(0, 3)).toStrictEqual([0xa0, 0x9c, 0x01]);
  });

  it('writes any string as Buffer encodes it to UTF-8, whether it starts ASCII and turns non-ASCII or not', () => {
    const units = fc.oneof(fc.string({ unit: 'binary-ascii' }), fc.string({ unit: 'grapheme' }), fc.string({ unit: 'binary' }));
    fc.assert(
      fc.property(fc.tuple(units, units), ([a, b]) => {
        const s = a + b;
        const utf8 = Buffer.from(s, 'utf8');
        const got = bytes((w) => w.string(s), 4);
        // The length prefix is one LEB128 byte below 128, which every string of 42 units or fewer is.
        if (utf8.length < 128) expect(got).toStrictEqual([utf8.length, ...utf8]);
        else expect(Buffer.from(got.slice(got.length - utf8.length)).equals(utf8)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('writes a lone surrogate as U+FFFD, as the JSON path does', () => {
    expect(bytes((w) => w.string('a\ud800'))).toStrictEqual([4, 0x61, 0xef, 0xbf, 0xbd]);
    expect(bytes((w) => w.string('\udc00'.repeat(50))).slice(0, 3)).toStrictEqual([150, 1, 0xef]);
  });

  it('writes 64-bit integers little-endian, negative ones in two’s complement', () => {
    expect(bytes((w) => w.int64(1))).toStrictEqual([1, 0, 0, 0, 0, 0, 0, 0]);
    expect(bytes((w) => w.int64(2 ** 32 + 2))).toStrictEqual([2, 0, 0, 0, 1, 0, 0, 0]);
    expect(bytes((w) => w.int64(-1))).toStrictEqual([255, 255, 255, 255, 255, 255, 255, 255]);
    expect(bytes((w) => w.int64(-(2 ** 53)))).toStrictEqual([0, 0, 0, 0, 0, 0, 0xe0, 0xff]);
    expect(bytes((w) => w.int64(2 ** 53 - 1))).toStrictEqual([255, 255, 255, 255, 255, 255, 0x1f, 0]);
  });

  it('writes a double as its own bits, -0 included, and Nullable markers and UInt8 as one byte', () => {
    expect(bytes((w) => w.float64(-0))).toStrictEqual([0, 0, 0, 0, 0, 0, 0, 0x80]);
    expect(bytes((w) => w.float64(5e-324))).toStrictEqual([1, 0, 0, 0, 0, 0, 0, 0]);
    expect(bytes((w) => (w.isNull(true), w.isNull(false), w.uint8(7)))).toStrictEqual([1, 0, 7]);
  });

  it('grows past its first buffer without losing what it wrote', () => {
    const got = bytes((w) => {
      for (let i = 0; i < 100; i++) w.string(`row-${i}`);
    }, 8);
    expect(got.length).toBe(100 + [...Array(100).keys()].reduce((n, i) => n + `row-${i}`.length, 0));
    expect(Buffer.from(got.slice(1, 6)).toString()).toBe('row-0');
  });

  it('writes into a buffer handed to it from the start: its bytes() hold nothing of what the buffer held before', () => {
    const first = new RowBinaryWriter(64);
    first.string('a much longer first body than the second');
    const reused = first.buffer();
    const second = new RowBinaryWriter(reused);
    second.string('ab');
    expect([...second.bytes()]).toStrictEqual([2, 0x61, 0x62]);
    // The same memory, no copy: a reuse allocates nothing until it must grow.
    expect(second.buffer()).toBe(reused);
    for (let i = 0; i < 20; i++) second.string('0123456789');
    expect(second.buffer()).not.toBe(reused);
    expect(second.bytes().length).toBe(3 + 20 * 11);
  });
});
