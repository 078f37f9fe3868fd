import { encodeEvent, encodeEventBatch } from '@pushbase/contracts';
import { EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';
import { APPEND_HEADER, appendMessages, decodeMessage, offsetNumber, partitionerFor, PoisonEventError, type IncomingMessage } from '../src/messages';

const event = (seq: number, dataset = 'sales'): DatasetEvent => ({
  type: 'RecordsAppended',
  schema_version: EVENT_SCHEMA_VERSION,
  account: 'acct',
  dataset,
  incarnation: 'inc',
  at: seq,
  records: [{ n: seq }],
  delete_by: null,
});

/** What a consumer would receive for an outgoing message stored at `offset`. */
const received = (m: ReturnType<typeof appendMessages>[number], offset: string): IncomingMessage => ({
  key: Buffer.from(m.key),
  value: m.value,
  offset,
  ...(m.headers ? { headers: Object.fromEntries(Object.entries(m.headers).map(([k, v]) => [k, Buffer.from(v)])) } : {}),
});

const poison = (run: () => unknown): PoisonEventError => {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(PoisonEventError);
    return err as PoisonEventError;
  }
  throw new Error('decoded without an error');
};

describe('Kafka messages', () => {
  it('keys a message by account/dataset and carries one event, with no header for a single event', () => {
    const [m, ...rest] = appendMessages([event(1)]);
    expect(rest).toEqual([]);
    expect(m!.key).toBe('acct/sales');
    // The file log's encoding: its frame of this one-event append is `[<this value>]`.
    expect(m!.value.toString('utf8')).toBe(encodeEvent(event(1)).toString('utf8'));
    expect(`[${m!.value.toString('utf8')}]`).toBe(encodeEventBatch([event(1)]).toString('utf8'));
    expect(JSON.parse(m!.value.toString('utf8'))).toMatchObject({ schema_version: EVENT_SCHEMA_VERSION, fields: ['n'], rows: [[1]] });
    expect(m!.headers).toBeUndefined();
    expect(decodeMessage('t', 2, received(m!, '41'))).toEqual({ event: event(1), position: { partition: 2, offset: 41 }, append: { index: 0, count: 1 } });
  });

  it('numbers the events of a several-event append, and reads the numbers back', () => {
    const messages = appendMessages([event(1), event(2), event(3)]);
    expect(messages.map((m) => m.headers?.[APPEND_HEADER])).toEqual(['0/3', '1/3', '2/3']);
    expect(messages.map((m, i) => decodeMessage('t', 0, received(m, String(10 + i))).append)).toEqual([
      { index: 0, count: 3 },
      { index: 1, count: 3 },
      { index: 2, count: 3 },
    ]);
  });

  it('hands over the trace context of the append that wrote a message, beside its append numbering', () => {
    const [m] = appendMessages([event(1), event(2)]);
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const withTrace = { ...received(m!, '7'), headers: { [APPEND_HEADER]: Buffer.from('0/2'), traceparent: Buffer.from(traceparent), tracestate: 'vendor=x' } };
    expect(decodeMessage('t', 0, withTrace)).toMatchObject({ append: { index: 0, count: 2 }, trace: { traceparent, tracestate: 'vendor=x' } });
    expect(decodeMessage('t', 0, received(m!, '7'))).not.toHaveProperty('trace');
  });

  it('falls back to encoding the event when `encoded` is not a one-event array', () => {
    const e = event(1);
    const [m] = appendMessages([e], encodeEvent(e));
    expect(m!.value.toString('utf8')).toBe(encodeEvent(e).toString('utf8'));
  });

  it('stops on a message it cannot read, naming topic, partition, offset and why', () => {
    const [m] = appendMessages([event(1)]);
    const good = received(m!, '7');
    const cases: [IncomingMessage, RegExp][] = [
      [{ ...good, value: null }, /has no value/],
      [{ ...good, value: Buffer.from('{"type":') }, /not JSON/],
      [{ ...good, value: Buffer.from(JSON.stringify({ ...event(1), schema_version: EVENT_SCHEMA_VERSION + 1 })) }, new RegExp(`schema_version ${EVENT_SCHEMA_VERSION + 1}, newer`)],
      [{ ...good, value: Buffer.from(JSON.stringify({ ...event(1), type: 'Unknown' })) }, /unknown event type "Unknown"/],
      [{ ...good, key: Buffer.from('acct/other') }, /key "acct\/other", not "acct\/sales"/],
      [{ ...good, key: null }, /key is missing/],
      [{ ...good, headers: { [APPEND_HEADER]: Buffer.from('3/3') } }, /header is not index\/count/],
      [{ ...good, headers: { [APPEND_HEADER]: Buffer.from('x') } }, /header is not index\/count/],
    ];
    for (const [message, why] of cases) {
      const err = poison(() => decodeMessage('events', 5, message));
      expect(err.message).toMatch(why);
      expect(err.message).toContain('events/5@7');
      expect(err).toMatchObject({ topic: 'events', partition: 5, offset: '7', retriable: false });
    }
  });

  it('reads offsets as numbers up to 2^53 - 1 and refuses larger ones instead of rounding', () => {
    expect(offsetNumber('0')).toBe(0);
    expect(offsetNumber('9007199254740991')).toBe(Number.MAX_SAFE_INTEGER);
    expect(() => offsetNumber('9007199254740992')).toThrow(RangeError);
    expect(() => offsetNumber('-1')).toThrow(RangeError);
  });

  it('puts a key always in the same partition, and spreads keys over all partitions', () => {
    const partitionOf = partitionerFor(6);
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const key = `acct/ds-${i}`;
      expect(partitionOf(key)).toBe(partitionerFor(6)(key));
      seen.add(partitionOf(key));
    }
    expect([...seen].sort()).toEqual([0, 1, 2, 3, 4, 5]);
  });
});
