import type { DatasetRecord } from '@pushbase/domain';
import { allFieldsOf, fieldsOf, rowsProblem, toRecords, toRows } from '../src/positional-records';

describe('records by position', () => {
  const records: DatasetRecord[] = [
    { day: '2024-01-01', n: 1, note: null },
    { note: 'x', day: '2024-01-02', n: 2.5 },
  ];

  it('turns records into rows in the given field order and back into equal records', () => {
    const fields = fieldsOf(records);
    expect(fields).toEqual(['day', 'n', 'note']);
    const rows = toRows(fields, records);
    expect(rows).toEqual([
      ['2024-01-01', 1, null],
      ['2024-01-02', 2.5, 'x'],
    ]);
    const back = toRecords(fields, rows);
    expect(back).toEqual(records);
    expect(Object.keys(back[1]!)).toEqual(fields);
  });

  it('writes null for a field a record lacks, and every key of mixed records with allFieldsOf', () => {
    const mixed: DatasetRecord[] = [{ a: 1 }, { b: 'y' }];
    const fields = allFieldsOf(mixed);
    expect(fields).toEqual(['a', 'b']);
    expect(toRows(fields, mixed)).toEqual([
      [1, null],
      [null, 'y'],
    ]);
  });

  // Names outside the domain's field-key syntax take the generic path; they must round-trip all the same,
  // and none may reach the prototype or break out of a property name.
  it.each([
    ['upper case and spaces', ['Day Of', 'n']],
    ['quotes and backslashes', ['a"b', 'c\\d', "e'f"]],
    ['__proto__ and constructor', ['__proto__', 'constructor']],
    ['a field named twice', ['a', 'a']],
  ])('round-trips field names with %s', (_what, fields) => {
    const rows = [fields.map((_, i) => i), fields.map((f) => f)];
    const back = toRecords(fields, rows);
    for (const r of back) expect(Object.getPrototypeOf(r)).toBe(Object.prototype);
    if (new Set(fields).size === fields.length) {
      expect(back.map((r) => Object.keys(r))).toEqual([fields, fields]);
      expect(toRows(fields, back)).toEqual(rows);
    }
  });

  it('names the first row that is not an array of one value per field', () => {
    expect(rowsProblem(['a', 'b'], [[1, 2], [3, 4]])).toBeUndefined();
    expect(rowsProblem(['a', 'b'], [[1, 2], [3]])).toBe('row 1 must be an array of 2 values');
    expect(rowsProblem(['a'], [{ a: 1 }])).toBe('row 0 must be an array of 1 values');
  });
});
