/*
 * ClickHouse's RowBinary input format, for the records table's inserts. Written by hand because the
 * client (@clickhouse/client) encodes only its JSON and text formats; it sends a RowBinary body we made
 * unchanged (client.ts, insertBody). Why RowBinary and not JSONEachRow, which the store sent before:
 * measured on 50,000 rows of a seven-field dataset on this 2-core machine, encoding took 90–160 ms
 * instead of 230–390 ms (no JSON.stringify, no BigInt to text for a double's bits), the body is less than
 * half the size (7.4 MB instead of 16.2 MB) and the server parses it with less CPU; the projector encodes
 * every row it writes, so this is most of its own work per row.
 *
 * The format (both 18.16 and current versions): the columns of the INSERT's column list, in that order, each
 * value with no separator: String = unsigned LEB128 byte length + UTF-8 bytes; UInt8 = 1 byte; UInt32 = 4 bytes little-endian; UInt64 and
 * Int64 = 8 bytes little-endian; Float64 = 8 bytes IEEE-754 little-endian; Nullable(T) = one byte, 1 for NULL
 * (nothing follows) or 0 followed by T.
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
      const n = this.buf.write(s, this.at + 1, 'utf8');
      this.buf[this.at] = n;
      this.at += 1 + n;
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
