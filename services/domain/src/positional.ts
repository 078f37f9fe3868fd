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
}

export function recordShape(fields: readonly string[]): RecordShape {
  // Parsed from JSON rather than built by assignment: JSON.parse gives an object with its fields in-object,
  // and spreading it copies that layout. (Field keys are plain identifiers, never `__proto__`.)
  const template = JSON.parse(JSON.stringify(Object.fromEntries(fields.map((f) => [f, null])))) as Record<string, FieldValue>;
  const blank = (): Record<string, FieldValue> => ({ ...template });
  return {
    fields,
    blank,
    fromValues(values) {
      const r = blank();
      for (let i = 0; i < fields.length; i++) r[fields[i]!] = values[i] ?? null;
      return r;
    },
    toValues(record) {
      const out = new Array<FieldValue>(fields.length);
      for (let i = 0; i < fields.length; i++) out[i] = record[fields[i]!] ?? null;
      return out;
    },
  };
}
