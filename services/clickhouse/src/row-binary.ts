/*
 * ClickHouse's RowBinary input format, for the records table's inserts: written by hand because the client
 * encodes only JSON and text formats (it sends this body unchanged: client.ts, insertBody), and RowBinary
 * because encoding is most of the projector's own work per row. The format and why: docs/clickhouse.md →
 * The records table's inserts.
 */

const TWO_TO_32 = 4_294_967_296;

export class RowBinaryWriter {
  private buf: Buffer;
  private at = 0;

  /** `initial`: a size to allocate, or a buffer to write into (a writer reusing an earlier one's, `buffer()`). */
  constructor(initial: number | Buffer = 1 << 20) {
    this.buf = typeof initial === 'number' ? Buffer.allocUnsafe(initial) : initial;
  }

  get length(): number {
    return this.at;
  }

  /**
   * UTF-8, as Buffer writes it: a lone surrogate (no UTF-8 form) becomes U+FFFD, as layout.ts's wellFormed
   * does for the JSON reads.
   */
  string(s: string): void {
    // Up to 42 UTF-16 units make at most 126 bytes, so the length fits one LEB128 byte written afterwards.
    if (s.length < 43) {
      this.ensure(1 + 3 * s.length);
      // Most short strings are ASCII (ids, keys, enum-like values), and a plain loop writes them faster than
      // Buffer#write's call into C++; the first non-ASCII unit hands the whole string to Buffer#write.
      const buf = this.buf;
      const start = this.at + 1;
      let i = 0;
      for (; i < s.length; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        buf[start + i] = c;
      }
      const n = i === s.length ? i : buf.write(s, start, 'utf8');
      buf[this.at] = n;
      this.at = start + n;
      return;
    }
    const n = Buffer.byteLength(s, 'utf8');
    this.ensure(5 + n);
    let v = n;
    while (v >= 0x80) {
      this.buf[this.at++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    this.buf[this.at++] = v;
    this.at += this.buf.write(s, this.at, 'utf8');
  }

  uint8(v: number): void {
    this.ensure(1);
    this.buf[this.at++] = v;
  }

  uint32(v: number): void {
    this.ensure(4);
    this.buf.writeUInt32LE(v, this.at);
    this.at += 4;
  }

  /** A UInt64 or Int64 column from a safe integer (the store checks versions and offsets are). */
  int64(v: number): void {
    this.ensure(8);
    const high = Math.floor(v / TWO_TO_32);
    this.buf.writeUInt32LE(v - high * TWO_TO_32, this.at);
    this.buf.writeInt32LE(high, this.at + 4);
    this.at += 8;
  }

  /** A double's own 8 bytes: as a Float64, or as the UInt64 of its bits (the records table's num_i_bits). */
  float64(v: number): void {
    this.ensure(8);
    this.buf.writeDoubleLE(v, this.at);
    this.at += 8;
  }

  /** A Nullable column's marker: true writes NULL, and nothing may follow; false is followed by the value. */
  isNull(isNull: boolean): void {
    this.uint8(isNull ? 1 : 0);
  }

  /** Copies bytes another writer wrote (whole rows) after the ones written so far. */
  bytesFrom(bytes: Uint8Array): void {
    this.ensure(bytes.length);
    this.buf.set(bytes, this.at);
    this.at += bytes.length;
  }

  /** The bytes written so far (a view, not a copy). */
  bytes(): Buffer {
    return this.buf.subarray(0, this.at);
  }

  /**
   * The whole buffer written into (grown as needed), for a later writer to reuse once nothing reads
   * `bytes()` any more.
   */
  buffer(): Buffer {
    return this.buf;
  }

  private ensure(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(grown, 0, 0, this.at);
    this.buf = grown;
  }
}
