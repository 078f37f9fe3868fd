import type { DatasetDefinition, DatasetRecord, FieldValue } from './types';

/*
 * Records by position: a dataset's records stored as values in the dataset's field order, without their
 * keys (the snapshot's columns; any positional encoding of events). One place decides that order and
 * builds records back from it, so every codec gives records identical to the ones the domain decided:
 * the same keys, in the same order (parseRecord fills them in definition order), hence the same JSON.
 */

/** The dataset's field order: the order its definition lists its fields, the key order of its records. */
export const fieldOrder = (definition: DatasetDefinition): string[] => Object.keys(definition.fields);

/** Builds and takes apart the records of one field order. */
export interface RecordShape {
  readonly fields: readonly string[];
  /**
   * A new record with every field null, keys in field order, for a decoder to fill in place
   * (`r[fields[i]] = value`). Every record of a shape shares one V8 hidden class with its fields in the
   * object itself: far cheaper to make by the million than an object grown key by key.
   */
  blank(): Record<string, FieldValue>;
  /** The record whose values are `values`, by position. */
  fromValues(values: readonly FieldValue[]): DatasetRecord;
  /** The record's values by position; a field the record lacks reads as null. */
  toValues(record: DatasetRecord): FieldValue[];
  /**
   * Writes the records' values into `columns` (one array per field, by position) from index `at` on,
   * building nothing per record (a snapshot's columns). Returns the index of the first record that lacks
   * one of the fields, its values and the later records' left unwritten, or -1 when every record has all.
   */
  intoColumns(records: readonly DatasetRecord[], columns: readonly FieldValue[][], at: number): number;
}

export function recordShape(fields: readonly string[]): RecordShape {
  // Parsed from JSON rather than built by assignment: JSON.parse gives an object with its fields in-object,
  // and spreading it copies that layout. (Field keys are plain identifiers, never `__proto__`.)
  const template = JSON.parse(JSON.stringify(Object.fromEntries(fields.map((f) => [f, null])))) as Record<string, FieldValue>;
  const blank = (): Record<string, FieldValue> => ({ ...template });
  // A name Object.prototype also has takes the generic path: `{"__proto__": …}` in a literal sets the
  // prototype, and `r["constructor"]` of a record without that field reads the prototype's function.
  const plain = fields.every((f) => !(f in Object.prototype));
  // Stryker disable next-line ConditionalExpression: the generic path gives the same answers, only slower
  return { fields, blank, ...(plain ? generated(fields) : generic(fields, blank)) };
}

/*
 * The conversions of a shape of plain keys are generated (new Function), one straight-line function per
 * field list, instead of looping over the names: the loop writes (or reads) a different key at one site
 * for every field, which V8 runs as a megamorphic keyed access. Events are turned to rows and back on every
 * write, so this is the difference between the positional encoding paying for itself and not
 * (docs/performance.md → Measurements behind the code). Names reach the generated code
 * only as JSON.stringify quotes them, which is a valid JavaScript string literal for any string.
 */
function generated(fields: readonly string[]): Pick<RecordShape, 'fromValues' | 'toValues' | 'intoColumns'> {
  const names = fields.map((f) => JSON.stringify(f));
  /* eslint-disable @typescript-eslint/no-implied-eval -- names only as quoted string literals; see above */
  const fromValues = new Function('v', `return {${names.map((n, i) => `${n}: v[${i}] ?? null`).join(', ')}};`) as RecordShape['fromValues'];
  const toValues = new Function('r', `return [${names.map((n) => `r[${n}] ?? null`).join(', ')}];`) as RecordShape['toValues'];
  const intoColumns = new Function(
    'records',
    'columns',
    'at',
    `${names.map((_, i) => `const c${i} = columns[${i}];`).join(' ')}
    for (let i = 0; i < records.length; i++) {
      const r = records[i];
      ${names.map((n, i) => `const v${i} = r[${n}];`).join(' ')}
      if (${names.map((_, i) => `v${i} === undefined`).join(' || ') || 'false'}) return i;
      ${names.map((_, i) => `c${i}[at + i] = v${i};`).join(' ')}
    }
    return -1;`,
  ) as RecordShape['intoColumns'];
  /* eslint-enable @typescript-eslint/no-implied-eval */
  return { fromValues, toValues, intoColumns };
}

function generic(fields: readonly string[], blank: () => Record<string, FieldValue>): Pick<RecordShape, 'fromValues' | 'toValues' | 'intoColumns'> {
  return {
    intoColumns(records, columns, at) {
      for (let i = 0; i < records.length; i++) {
        const r = records[i]!;
        if (fields.some((f) => !Object.hasOwn(r, f) || r[f] === undefined)) return i;
        for (let j = 0; j < fields.length; j++) columns[j]![at + i] = r[fields[j]!]!;
      }
      return -1;
    },
    fromValues(values) {
      const r = blank();
      for (let i = 0; i < fields.length; i++) r[fields[i]!] = values[i] ?? null;
      return r;
    },
    toValues(record) {
      const out = new Array<FieldValue>(fields.length);
      for (let i = 0; i < fields.length; i++) out[i] = Object.hasOwn(record, fields[i]!) ? (record[fields[i]!] ?? null) : null;
      return out;
    },
  };
}
