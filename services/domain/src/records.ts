import { fieldOf } from './definition';
import { clip, describeValue, invalid, quoteValue } from './errors';
import { recordShape, type RecordShape } from './positional';
import { longerThan, NOT_WELL_FORMED } from './text';
import { isCalendarDate, normaliseDateTime } from './time';
import { LIMITS, type DatasetDefinition, type DatasetRecord, type FieldDefinition, type FieldValue } from './types';

/** Returns the normalised value, or a string saying why the value is refused. */
type Normaliser = (v: unknown) => FieldValue | Refusal;
class Refusal {
  constructor(readonly reason: string) {}
}

const MAX_MONEY = 2 ** 53;

// Number.isFinite is false for anything but a number, so past it v is one.
const finiteNumber = (kind: string): Normaliser => (v) =>
  Number.isFinite(v) ? (v as number) : new Refusal(`must be a ${kind} (a finite JSON number)`);

function normaliserFor(field: FieldDefinition): Normaliser {
  switch (field.type) {
    case 'number':
      return finiteNumber('number');
    case 'percentage':
      return finiteNumber('percentage');
    case 'duration':
      return finiteNumber('duration');
    case 'money':
      return (v) =>
        // Number.isInteger is false for anything but a number, so past it v is one.
        Number.isInteger(v) && Math.abs(v as number) <= MAX_MONEY
          ? (v as number)
          : new Refusal(`must be an integer amount in the smallest unit of ${field.currency_code ?? 'the currency'} (e.g. 1000 for 10.00)`);
    case 'string':
      return (v) => {
        if (typeof v !== 'string') return new Refusal('must be a string');
        if (longerThan(v, LIMITS.stringLength)) return new Refusal(`must be at most ${LIMITS.stringLength} characters long`);
        if (!v.isWellFormed()) return new Refusal(`must be ${NOT_WELL_FORMED}`);
        return v;
      };
    case 'date':
      return (v) => (typeof v === 'string' && isCalendarDate(v) ? v : new Refusal('must be a date formatted YYYY-MM-DD'));
    case 'datetime':
      return (v) => {
        if (typeof v !== 'string') return new Refusal('must be an ISO 8601 date-time string such as 2024-01-31T12:00:00Z');
        return normaliseDateTime(v) ?? new Refusal('must be an ISO 8601 date-time such as 2024-01-31T12:00:00Z');
      };
  }
}

const describe = describeValue;

interface CompiledField {
  readonly key: string;
  readonly optional: boolean;
  /** The key also names an Object.prototype member (`constructor`), so only an own property counts. */
  readonly shadowsPrototype: boolean;
  readonly normalise: Normaliser;
}
interface CompiledDefinition {
  readonly fields: readonly CompiledField[];
  readonly keys: ReadonlySet<string>;
  /** Builds the output record from its values in field order, all in one object literal. */
  readonly shape: RecordShape;
  /** Scratch for one record's values (validation is synchronous, so one per definition serves). */
  readonly values: FieldValue[];
}

// A definition is immutable once parsed, so its compiled validators can be cached by identity.
const compiled = new WeakMap<DatasetDefinition, CompiledDefinition>();
const compile = (def: DatasetDefinition): CompiledDefinition => compiled.get(def) ?? compileAndCache(def);
function compileAndCache(def: DatasetDefinition): CompiledDefinition {
  const fields = Object.entries(def.fields).map(([key, f]) => ({
    key,
    optional: f.optional,
    shadowsPrototype: key in Object.prototype,
    normalise: normaliserFor(f),
  }));
  const c = { fields, keys: new Set(fields.map((f) => f.key)), shape: recordShape(fields.map((f) => f.key)), values: new Array<FieldValue>(fields.length).fill(null) };
  compiled.set(def, c);
  return c;
}

/** Validates and normalises one record; `index` only names it in the error. */
export function parseRecord(def: DatasetDefinition, raw: unknown, index: number): DatasetRecord {
  return parseCompiled(compile(def), raw, index);
}

const at = (index: number): string => `data[${index}]`;

// The hot path of every write: no allocation but the output record; error texts are built only on failure.
function parseCompiled(c: CompiledDefinition, raw: unknown, index: number): DatasetRecord {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw invalid(`Record ${index} (${at(index)}) must be an object, not ${describe(raw)}`, at(index));
  }
  const obj = raw as Record<string, unknown>;
  for (const key in obj) {
    if (!c.keys.has(key)) {
      throw invalid(
        `Record ${index} (${at(index)}) has the unknown field "${clip(key)}"; the dataset defines ${[...c.keys].join(', ')}`,
        `${at(index)}.${clip(key)}`,
      );
    }
  }
  // Values first, then the record in one go (RecordShape.fromValues): an object grown key by key through
  // a store whose key changes every field is the slow way to make one, and this runs for every record.
  const out = c.values;
  const fields = c.fields;
  for (let j = 0; j < fields.length; j++) {
    const f = fields[j]!;
    // Own keys only: a missing field named "constructor" is missing, not Object.prototype's.
    const v = f.shadowsPrototype && !Object.hasOwn(obj, f.key) ? undefined : obj[f.key];
    if (v === undefined || v === null) {
      if (!f.optional) {
        throw invalid(
          `Record ${index} (${at(index)}): the field "${f.key}" is required${v === null ? ' and may not be null' : ' but missing'}`,
          `${at(index)}.${f.key}`,
        );
      }
      out[j] = null;
      continue;
    }
    const n = f.normalise(v);
    if (n instanceof Refusal) {
      throw invalid(`Record ${index} (${at(index)}): the field "${f.key}" ${n.reason}; got ${quoteValue(v)}`, `${at(index)}.${f.key}`);
    }
    out[j] = n;
  }
  return c.shape.fromValues(out);
}

/**
 * Validates the `data` array of an append or replace. The request is validated whole before anything is
 * written: the first failing record is named by index and field.
 */
export function parseRecords(def: DatasetDefinition, data: unknown): DatasetRecord[] {
  checkRecordList(data);
  const c = compile(def);
  // Stryker disable next-line ArrayDeclaration: the length only preallocates; every slot is filled below
  const out = new Array<DatasetRecord>(data.length);
  for (let i = 0; i < data.length; i++) out[i] = parseCompiled(c, data[i], i);
  return out;
}

/** What parseRecords checks of `data` without the definition: an array of at most 500 objects. */
function checkRecordList(data: unknown): asserts data is unknown[] {
  if (data === undefined) throw invalid('"data" is required: an array of records', 'data');
  if (!Array.isArray(data)) throw invalid(`"data" must be an array of records, not ${describe(data)}`, 'data');
  if (data.length > LIMITS.recordsPerRequest) {
    throw invalid(
      `Too many records: at most ${LIMITS.recordsPerRequest} records can be written in one request, ${data.length} were sent; send several append requests instead`,
      'data',
    );
  }
  for (let i = 0; i < data.length; i++) {
    const raw: unknown = data[i];
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      throw invalid(`Record ${i} (${at(i)}) must be an object, not ${describe(raw)}`, at(i));
    }
  }
}

/**
 * What can be checked of an append or replace body without its dataset: `data` (an array of at most 500
 * objects) and, on append, the shape of `delete_by` / `deleteBy`. Checked before the dataset is looked up,
 * so a malformed request is refused whatever the dataset's state (missing, or a change of it pending).
 */
export function checkWriteBody(body: Readonly<Record<string, unknown>>, kind: 'append' | 'replace'): void {
  checkRecordList(body.data);
  if (kind === 'append') {
    deleteByKey(body.delete_by, 'delete_by');
    deleteByKey(body.deleteBy, 'deleteBy');
  }
}

/** One of `delete_by` / `deleteBy` as sent: a field key, or null for none (absent, null or ""). */
function deleteByKey(raw: unknown, name: 'delete_by' | 'deleteBy'): string | null {
  let key = raw;
  // A one-element list, as some clients send it; its element is a key like the bare form.
  if (Array.isArray(key)) {
    if (key.length !== 1 || typeof key[0] !== 'string') {
      throw invalid(`"${name}" must be the key of a date or datetime field (or a list of exactly that one key)`, name);
    }
    key = key[0];
  }
  if (key === undefined || key === null || key === '') return null;
  if (typeof key !== 'string') throw invalid(`"${name}" must be the key of a date or datetime field`, name);
  return key;
}

/**
 * Reads `delete_by` (also `deleteBy`, and a one-element array, as real clients send it). It must name a
 * date or datetime field of the dataset. Null when absent.
 *
 * The official clients send one spelling each (geckoboard-py `delete_by`, the geckoboard npm client
 * `deleteBy`), never both; a request that carries both gets each checked, and they must not name two
 * different fields: a malformed or contradicting second spelling is a client bug worth a 400, not
 * something to drop silently.
 */
export function parseDeleteBy(def: DatasetDefinition, body: Readonly<Record<string, unknown>>): string | null {
  const snake = deleteByField(def, body.delete_by, 'delete_by');
  const camel = deleteByField(def, body.deleteBy, 'deleteBy');
  if (snake !== null && camel !== null && snake !== camel) {
    throw invalid(`"delete_by" and "deleteBy" name different fields ("${snake}" and "${camel}"); send one of them`, 'deleteBy');
  }
  return snake ?? camel;
}

/** One spelling checked against the dataset: a date or datetime field's key, or null for none. */
function deleteByField(def: DatasetDefinition, raw: unknown, name: 'delete_by' | 'deleteBy'): string | null {
  const key = deleteByKey(raw, name);
  if (key === null) return null;
  const field = fieldOf(def.fields, key);
  if (field === undefined) {
    throw invalid(`"${name}" names the unknown field "${clip(key)}"; it must be a date or datetime field of the dataset`, name);
  }
  if (field.type !== 'date' && field.type !== 'datetime') {
    throw invalid(`"${name}" must name a date or datetime field; "${key}" is of type ${field.type}`, name);
  }
  return key;
}

/**
 * The unique key of a record under `unique_by`: equal exactly when every unique_by value is equal
 * (type included, so the number 1 and the string "1" differ).
 */
export function uniqueKey(uniqueBy: readonly string[], record: DatasetRecord): string {
  if (uniqueBy.length === 1) return keyPart(record[uniqueBy[0] as string] ?? null);
  // JSON keeps the parts unambiguous whatever characters the values hold. (A loop, not map(): this runs
  // per record and a closure per call is not free.)
  const values: FieldValue[] = [];
  for (const f of uniqueBy) values.push(record[f] ?? null);
  return JSON.stringify(values);
}
const keyPart = (v: FieldValue): string => (v === null ? 'z' : typeof v === 'number' ? `n${v}` : `s${v}`);
