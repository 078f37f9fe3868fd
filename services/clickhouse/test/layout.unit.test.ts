import fc from 'fast-check';
import { parseDefinition } from '@pushbase/domain';
import { columnsOf, dateMillis, decodeRecord, doubleBits, doubleFromBits, encodeRecord, slotsOf, wellFormed } from '../src/layout';

describe('slot layout', () => {
  const def = parseDefinition({
    fields: {
      day: { type: 'date', name: 'Day' },
      amount: { type: 'money', name: 'Amount', currency_code: 'EUR' },
      label: { type: 'string', name: 'Label' },
      at: { type: 'datetime', name: 'At', optional: true },
      share: { type: 'percentage', name: 'Share' },
      took: { type: 'duration', name: 'Took', time_unit: 'seconds' },
    },
  });

  it('maps each field to the next slot of its kind, in definition order', () => {
    expect(columnsOf(def)).toEqual({ day: 'time_0', amount: 'num_0', label: 'str_0', at: 'time_1', share: 'num_1', took: 'num_2' });
  });

  it('is the same for an equal definition parsed again (it depends on the definition alone)', () => {
    const again = parseDefinition(JSON.parse(JSON.stringify(def)));
    expect(slotsOf(again)).toEqual(slotsOf(def));
  });

  it('fills ten slots of one kind', () => {
    const ten = parseDefinition({ fields: Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`s${i}`, { type: 'string', name: `S${i}` }])) });
    expect(Object.values(columnsOf(ten))).toEqual(Array.from({ length: 10 }, (_, i) => `str_${i}`));
  });

  it('encodes and decodes a record, leaving nulls out of the row', () => {
    const record = { day: '0000-01-01', amount: -(2 ** 53), label: "'\\\u0000😀", at: null, share: -0, took: 5e-324 };
    const row: Record<string, unknown> = {};
    encodeRecord(slotsOf(def), record, row);
    expect(row).not.toHaveProperty('time_1');
    expect(row.time_0).toBe(dateMillis('0000-01-01'));
    const text = Object.fromEntries(Object.entries(row).map(([k, v]) => [k, String(v)]));
    const back = decodeRecord(slotsOf(def), text);
    expect(back).toEqual(record);
    expect(Object.is(back.share, -0)).toBe(true);
  });

  it('refuses a value that is not the normalised form of its field', () => {
    expect(() => encodeRecord(slotsOf(def), { day: '2024-13-01x', amount: 1, label: 'x', at: null, share: 1, took: 1 }, {})).toThrow(/normalised date/);
    expect(() => encodeRecord(slotsOf(def), { day: '2024-01-01', amount: '1', label: 'x', at: null, share: 1, took: 1 }, {})).toThrow(/money/);
  });

  it('carries every double through its bits exactly (property)', () => {
    fc.assert(
      fc.property(fc.double(), (d) => {
        expect(Object.is(doubleFromBits(doubleBits(d)), d) || (Number.isNaN(d) && Number.isNaN(doubleFromBits(doubleBits(d))))).toBe(true);
      }),
      { numRuns: 5000 },
    );
  });

  it('writes lone surrogates as U+FFFD and keeps pairs', () => {
    expect(wellFormed('a\ud800b\udc00c😀')).toBe('a\ufffdb\ufffdc😀');
  });
});
