import { fieldOrder, recordShape, type DatasetRecord, type FieldValue } from '../src';

describe('records by position (recordShape)', () => {
  it('orders fields as the definition lists them', () => {
    expect(fieldOrder({ fields: { b: { type: 'number', name: 'B', optional: false }, a: { type: 'string', name: 'A', optional: true } }, unique_by: [] })).toEqual(['b', 'a']);
  });

  it('turns a record into its values in field order and back into an equal record with keys in that order', () => {
    const shape = recordShape(['day', 'n', 'note']);
    const record: DatasetRecord = { note: 'x', n: 2.5, day: '2024-01-02' };
    const values = shape.toValues(record);
    expect(values).toEqual(['2024-01-02', 2.5, 'x']);
    const back = shape.fromValues(values);
    expect(back).toEqual(record);
    expect(Object.keys(back)).toEqual(['day', 'n', 'note']);
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(shape.fromValues(values)).not.toBe(back);
  });

  it('reads a field a record lacks as null, and a missing value as null', () => {
    const shape = recordShape(['a', 'b']);
    expect(shape.toValues({ b: 'y' })).toEqual([null, 'y']);
    expect(shape.toValues({ a: 1, b: null })).toEqual([1, null]);
    expect(shape.fromValues([1])).toEqual({ a: 1, b: null });
  });

  it('makes blank records of every field null, new each time', () => {
    const shape = recordShape(['a', 'b']);
    const r = shape.blank();
    expect(r).toEqual({ a: null, b: null });
    r.a = 1;
    expect(shape.blank()).toEqual({ a: null, b: null });
  });

  // Names that Object.prototype also has, or that no identifier could be: the same answers, and none may
  // reach the prototype or read from it.
  it.each([
    ['quotes, backslashes and spaces', ['a"b', 'c\\d', "e'f", 'g h', '\u2028']],
    ['__proto__', ['__proto__', 'x']],
    ['constructor and toString', ['constructor', 'toString']],
    ['one of them among plain names', ['a', 'constructor']],
  ])('round-trips field names with %s', (_what, fields) => {
    const shape = recordShape(fields);
    const values: FieldValue[] = fields.map((_, i) => i);
    const record = shape.fromValues(values);
    expect(Object.getPrototypeOf(record)).toBe(Object.prototype);
    expect(Object.keys(record)).toEqual(fields);
    expect(fields.map((f) => Object.getOwnPropertyDescriptor(record, f)?.value as unknown)).toEqual(values);
    expect(shape.toValues(record)).toEqual(values);
    // A record without any of these fields has them null, not whatever Object.prototype holds by that name.
    expect(shape.toValues({})).toEqual(fields.map(() => null));
    // Into columns: the same values; a record lacking them (Object.prototype's do not count) is named.
    const columns: FieldValue[][] = fields.map(() => ['old']);
    expect(shape.intoColumns([record, record], columns, 1)).toBe(-1);
    expect(columns).toEqual(values.map((v) => ['old', v, v]));
    expect(shape.intoColumns([record, {}], columns, 0)).toBe(1);
  });

  it('writes records into columns from an index on, and names the first record that lacks a field', () => {
    const shape = recordShape(['day', 'n']);
    const columns: FieldValue[][] = [[], []];
    expect(shape.intoColumns([{ n: 1, day: 'a' }, { day: 'b', n: null }], columns, 2)).toBe(-1);
    expect(columns).toEqual([
      [undefined, undefined, 'a', 'b'],
      [undefined, undefined, 1, null],
    ]);
    expect(shape.intoColumns([{ day: 'c', n: 3 }, { day: 'd' }, { day: 'e', n: 5 }], columns, 0)).toBe(1);
    expect(columns[0]!.slice(0, 3)).toEqual(['c', undefined, 'a']);
    expect(shape.intoColumns([], columns, 0)).toBe(-1);
  });
});
