import {
  formatUtcMillis,
  LIMITS,
  parseDateMillis,
  parseDateTimeMillis,
  type DatasetDefinition,
  type DatasetRecord,
  type FieldType,
  type FieldValue,
} from '@pushbase/domain';

import type { RowBinaryWriter } from './row-binary';

/*
 * How a dataset's fields sit in the one records table: typed slots (num_i Float64, str_i String, time_i
 * Int64 epoch ms), so SQL can aggregate without parsing. A field's slot is its position among the
 * definition's fields of its kind, a pure function of the stored definition. Numbers travel as their IEEE-754
 * bits (num_i_bits), because 18.16's text parser rounds some doubles. Why: docs/clickhouse.md → Tables.
 */

export type SlotKind = 'num' | 'str' | 'time';
export const SLOTS_PER_KIND = LIMITS.fieldsPerDataset;
export const SLOT_KINDS: readonly SlotKind[] = ['num', 'str', 'time'];

const KIND: Readonly<Record<FieldType, SlotKind>> = {
  number: 'num',
  percentage: 'num',
  money: 'num',
  duration: 'num',
  string: 'str',
  date: 'time',
  datetime: 'time',
};

export interface Slot {
  readonly key: string;
  readonly type: FieldType;
  readonly kind: SlotKind;
  /** The column a SQL reader aggregates: `num_3`, `str_0`, `time_1`. */
  readonly column: string;
  /** The column the store writes and reads back: `num_3_bits` for numbers, else `column`. */
  readonly stored: string;
}

// A definition is immutable once parsed, so its layout is cached by identity.
const layouts = new WeakMap<DatasetDefinition, readonly Slot[]>();

export function slotsOf(definition: DatasetDefinition): readonly Slot[] {
  let slots = layouts.get(definition);
  if (slots === undefined) {
    const used: Record<SlotKind, number> = { num: 0, str: 0, time: 0 };
    slots = Object.entries(definition.fields).map(([key, f]) => {
      const kind = KIND[f.type];
      const index = used[kind]++;
      if (index >= SLOTS_PER_KIND) throw new Error(`A dataset has more than ${SLOTS_PER_KIND} fields of kind ${kind}`);
      const column = `${kind}_${index}`;
      return { key, type: f.type, kind, column, stored: kind === 'num' ? `${column}_bits` : column };
    });
    layouts.set(definition, slots);
  }
  return slots;
}

/** field key → column, as the heads table shows it to SQL readers. */
export const columnsOf = (definition: DatasetDefinition): Record<string, string> =>
  Object.fromEntries(slotsOf(definition).map((s) => [s.key, s.column]));

// One scratch word for the bit casts; the store runs on one thread per isolate.
const word = new DataView(new ArrayBuffer(8));

/** The IEEE-754 bits of a double, as the decimal text of a UInt64 (JSON numbers stop at 2^53). */
export function doubleBits(v: number): string {
  word.setFloat64(0, v);
  return word.getBigUint64(0).toString();
}

export function doubleFromBits(bits: string): number {
  word.setBigUint64(0, BigInt(bits));
  return word.getFloat64(0);
}

/** Epoch milliseconds of a date the domain took (`YYYY-MM-DD`); throws for anything else. */
export function dateMillis(date: string): number {
  const ms = parseDateMillis(date);
  if (ms === undefined) throw new Error(`${JSON.stringify(date)} is not a calendar date`);
  return ms;
}

// Lone surrogates have no UTF-8 form; ClickHouse's JSON reader refuses `\ud800` with a parse error, which
// would make the whole insert fail for ever. They are written as U+FFFD, as any UTF-8 store keeps them.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
export const wellFormed = (s: string): string => s.replace(LONE_SURROGATE, '\ufffd');

/** Adds the record's stored columns to `row` (nulls are left out: an omitted Nullable column is NULL). */
export function encodeRecord(slots: readonly Slot[], record: DatasetRecord, row: Record<string, unknown>): void {
  for (const s of slots) {
    const v: FieldValue = record[s.key] ?? null;
    if (v === null) continue;
    row[s.stored] = encodeValue(s, v);
  }
}

function encodeValue(s: Slot, v: string | number): string | number {
  switch (s.kind) {
    case 'num':
      if (typeof v !== 'number') break;
      return doubleBits(v);
    case 'str':
      if (typeof v !== 'string') break;
      return wellFormed(v);
    case 'time': {
      if (typeof v !== 'string') break;
      const ms = s.type === 'date' ? parseDateMillis(v) : parseDateTimeMillis(v);
      if (ms === undefined) break;
      return ms;
    }
  }
  throw new Error(`The ${s.type} field "${s.key}" holds ${JSON.stringify(v)}, not a normalised ${s.type}`);
}

// One plan per definition (immutable once parsed): the slot at each stored column, or none.
const plans = new WeakMap<DatasetDefinition, readonly (Slot | undefined)[]>();

/** The definition's slot at each of STORED_COLUMNS, in that order (undefined where it has none). */
export function storedPlan(definition: DatasetDefinition): readonly (Slot | undefined)[] {
  let plan = plans.get(definition);
  if (plan === undefined) {
    const byStored = new Map(slotsOf(definition).map((s) => [s.stored, s]));
    plan = STORED_COLUMNS.map((c) => byStored.get(c.stored));
    plans.set(definition, plan);
  }
  return plan;
}

/**
 * A row's slot columns in RowBinary (row-binary.ts), in STORED_COLUMNS order: the record's values where
 * `plan` has a slot, NULL elsewhere, and NULL throughout for `record` null (tombstones, head rows). The same
 * values encodeRecord gives: a number's own bits, a string's UTF-8 (lone surrogates as U+FFFD), a date or
 * datetime as epoch milliseconds.
 */
export function writeSlots(w: RowBinaryWriter, plan: readonly (Slot | undefined)[], record: DatasetRecord | null): void {
  for (const s of plan) {
    const v: FieldValue = s === undefined || record === null ? null : (record[s.key] ?? null);
    if (v === null) {
      w.isNull(true);
      continue;
    }
    const slot = s as Slot;
    switch (slot.kind) {
      case 'num':
        if (typeof v !== 'number') break;
        w.isNull(false);
        w.float64(v);
        continue;
      case 'str':
        if (typeof v !== 'string') break;
        w.isNull(false);
        w.string(v);
        continue;
      case 'time': {
        if (typeof v !== 'string') break;
        const ms = slot.type === 'date' ? parseDateMillis(v) : parseDateTimeMillis(v);
        if (ms === undefined) break;
        w.isNull(false);
        w.int64(ms);
        continue;
      }
    }
    throw new Error(`The ${slot.type} field "${slot.key}" holds ${JSON.stringify(v)}, not a normalised ${slot.type}`);
  }
}

/** A stored row's columns (as text, the way the store selects them) back into the fold's record. */
export function decodeRecord(slots: readonly Slot[], row: Readonly<Record<string, string | null | undefined>>): DatasetRecord {
  const record: Record<string, FieldValue> = {};
  for (const s of slots) record[s.key] = decodeValue(s, row[s.stored]);
  return record;
}

/** One slot's column, as text the way the store selects it, back into the field's value. */
export function decodeValue(s: Slot, raw: string | null | undefined): FieldValue {
  if (raw === null || raw === undefined) return null;
  switch (s.kind) {
    case 'num':
      return doubleFromBits(raw);
    case 'str':
      return raw;
    case 'time': {
      const iso = formatUtcMillis(Number(raw));
      return s.type === 'date' ? iso.slice(0, 10) : iso;
    }
  }
}

/** Every stored column of the slots, for SELECT lists and the table definition. */
export const STORED_COLUMNS: readonly { readonly kind: SlotKind; readonly stored: string; readonly column: string }[] = SLOT_KINDS.flatMap((kind) =>
  Array.from({ length: SLOTS_PER_KIND }, (_, i) => ({ kind, column: `${kind}_${i}`, stored: kind === 'num' ? `${kind}_${i}_bits` : `${kind}_${i}` })),
);
