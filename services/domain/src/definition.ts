import { code as currencyByCode } from 'currency-codes';
import { clip, describeValue, invalid, quoteValue } from './errors';
import { longerThan, NOT_WELL_FORMED } from './text';
import {
  FIELD_TYPES,
  LIMITS,
  TIME_UNITS,
  type DatasetDefinition,
  type FieldDefinition,
  type FieldType,
} from './types';

// docs/api.md → Routes (dataset ids) and Find or create a dataset (field keys).
const DATASET_ID = /^[a-z0-9](?:[a-z0-9._-]{0,98}[a-z0-9])?$/;
export const FIELD_KEY = /^[a-z][a-z0-9_]{0,49}$/;
const MULTI_UNIQUE_TYPES: ReadonlySet<FieldType> = new Set(['string', 'date', 'datetime']);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const describe = describeValue;
/** A field by key, own keys only: `fields["constructor"]` must not find Object.prototype's. */
export const fieldOf = (fields: Readonly<Record<string, FieldDefinition>>, key: string): FieldDefinition | undefined =>
  Object.hasOwn(fields, key) ? fields[key] : undefined;

/** Validates an already percent-decoded dataset id. */
export function parseDatasetId(id: string): string {
  if (!DATASET_ID.test(id)) {
    throw invalid(
      `Invalid dataset id "${clip(id, 120)}": use 1 to ${LIMITS.datasetIdLength} characters of a-z, 0-9, ".", "_" and "-", starting and ending with a letter or digit`,
      'id',
    );
  }
  return id;
}

export function isCurrencyCode(code: string): boolean {
  // currency-codes looks codes up upper-cased; ISO 4217 codes are written upper-case, so "usd" is refused.
  return code === code.toUpperCase() && currencyByCode(code) !== undefined;
}

function parseField(key: string, raw: unknown): FieldDefinition {
  const path = `fields.${clip(key)}`;
  if (!FIELD_KEY.test(key)) {
    throw invalid(
      `Invalid field key "${clip(key)}": field keys are lower case, start with a letter and hold only a-z, 0-9 and "_" (at most 50 characters)`,
      path,
    );
  }
  if (!isObject(raw)) throw invalid(`Field "${key}" must be an object with a type and a name, not ${describe(raw)}`, path);
  const { name, optional } = raw;
  const type = FIELD_TYPES.find((t) => t === raw.type);
  if (type === undefined) {
    throw invalid(`Field "${key}" has an invalid type ${quoteValue(raw.type)}: use one of ${FIELD_TYPES.join(', ')}`, `${path}.type`);
  }
  if (typeof name !== 'string' || name === '') {
    throw invalid(`Field "${key}" needs a name: a non-empty string`, `${path}.name`);
  }
  // A label, shown and sent back with every answer: a few hundred characters are plenty, and the bound
  // keeps a stored definition small (see LIMITS).
  if (longerThan(name, LIMITS.fieldNameLength)) {
    throw invalid(`Field "${key}" has a name longer than ${LIMITS.fieldNameLength} characters: a field name is at most ${LIMITS.fieldNameLength} characters (Unicode code points)`, `${path}.name`);
  }
  if (!name.isWellFormed()) throw invalid(`Field "${key}": the name must be ${NOT_WELL_FORMED}`, `${path}.name`);
  if (optional !== undefined && typeof optional !== 'boolean') {
    throw invalid(`Field "${key}": optional must be true or false`, `${path}.optional`);
  }
  const field: { -readonly [K in keyof FieldDefinition]: FieldDefinition[K] } = {
    type,
    name,
    optional: optional === true,
  };
  // currency_code belongs to money and time_unit to duration. On another type a valid value is tolerated
  // and dropped, and so is null: clients build every field from one template (sql-dataset's YAML, a dict
  // per field), serialisers write every member, and a field whose type changed keeps its old keys. An
  // invalid value is refused wherever it stands: it is a mistake (a money field typed wrong, a unit
  // misspelt) the client would otherwise never hear of, and docs/openapi.yaml documents both keys as such.
  const currency = raw.currency_code;
  if (type === 'money' || (currency !== undefined && currency !== null)) {
    if (typeof currency !== 'string' || !isCurrencyCode(currency)) {
      throw invalid(
        type === 'money'
          ? `Field "${key}" of type money needs a currency_code: an upper-case ISO 4217 code such as "USD" (got ${quoteValue(currency)})`
          : `Field "${key}" has an invalid currency_code ${quoteValue(currency)}: when given it must be an upper-case ISO 4217 code such as "USD" (only type money uses it)`,
        `${path}.currency_code`,
      );
    }
    if (type === 'money') field.currency_code = currency;
  }
  const rawUnit = raw.time_unit;
  if (type === 'duration' || (rawUnit !== undefined && rawUnit !== null)) {
    const unit = TIME_UNITS.find((u) => u === rawUnit);
    if (unit === undefined) {
      throw invalid(
        type === 'duration'
          ? `Field "${key}" of type duration needs a time_unit: one of ${TIME_UNITS.join(', ')}`
          : `Field "${key}" has an invalid time_unit ${quoteValue(rawUnit)}: when given it must be one of ${TIME_UNITS.join(', ')} (only type duration uses it)`,
        `${path}.time_unit`,
      );
    }
    if (type === 'duration') field.time_unit = unit;
  }
  return field;
}

/**
 * Validates the body of `PUT /datasets/:id`. Extra top-level keys (`id`, `created_at`…) are tolerated
 * because real clients echo them back.
 */
export function parseDefinition(body: unknown): DatasetDefinition {
  if (!isObject(body)) throw invalid(`The request body must be a JSON object with "fields", not ${describe(body)}`);
  const rawFields = body.fields;
  if (!isObject(rawFields)) throw invalid('"fields" is required: an object mapping field keys to field definitions', 'fields');
  const keys = Object.keys(rawFields);
  if (keys.length === 0) throw invalid('"fields" must define at least one field', 'fields');
  if (keys.length > LIMITS.fieldsPerDataset) {
    throw invalid(`A dataset can have at most ${LIMITS.fieldsPerDataset} fields; ${keys.length} were given`, 'fields');
  }
  const fields: Record<string, FieldDefinition> = {};
  for (const key of keys) fields[key] = parseField(key, rawFields[key]);

  let rawUnique = body.unique_by;
  // Some clients send a bare field key instead of a one-element list.
  if (typeof rawUnique === 'string') rawUnique = [rawUnique];
  // Insertion-ordered: unique_by keeps the order the client wrote.
  const uniqueFields = new Map<string, FieldDefinition>();
  if (rawUnique !== undefined && rawUnique !== null) {
    if (!Array.isArray(rawUnique)) throw invalid('"unique_by" must be an array of field keys', 'unique_by');
    for (const [i, key] of rawUnique.entries()) {
      if (typeof key !== 'string') throw invalid(`"unique_by"[${i}] must be a field key string`, `unique_by[${i}]`);
      const field = fieldOf(fields, key);
      if (field === undefined) {
        throw invalid(`"unique_by" names the unknown field "${clip(key)}"; the defined fields are ${keys.join(', ')}`, `unique_by[${i}]`);
      }
      if (uniqueFields.has(key)) throw invalid(`"unique_by" lists the field "${key}" twice`, `unique_by[${i}]`);
      uniqueFields.set(key, field);
    }
    if (uniqueFields.size > 1) {
      for (const [key, { type }] of uniqueFields) {
        if (!MULTI_UNIQUE_TYPES.has(type)) {
          throw invalid(`When "unique_by" lists several fields each must be of type string, date or datetime; "${key}" is ${type}`, 'unique_by');
        }
      }
    }
  }
  const unique_by = [...uniqueFields.keys()];
  return { fields, unique_by };
}

/** What differs between a stored and a requested definition; empty when they are the same definition. */
export function definitionDifferences(stored: DatasetDefinition, requested: DatasetDefinition): string[] {
  const out: string[] = [];
  const props = ['type', 'name', 'optional', 'currency_code', 'time_unit'] as const;
  for (const [key, a] of Object.entries(stored.fields)) {
    const b = fieldOf(requested.fields, key);
    if (b === undefined) {
      out.push(`field "${key}" is missing`);
      continue;
    }
    for (const p of props) {
      if (a[p] !== b[p]) out.push(`field "${key}" ${p} is ${JSON.stringify(a[p]) ?? 'unset'}, not ${JSON.stringify(b[p]) ?? 'unset'}`);
    }
  }
  for (const key of Object.keys(requested.fields)) {
    if (fieldOf(stored.fields, key) === undefined) out.push(`field "${key}" is not defined`);
  }
  const sa = [...stored.unique_by].sort();
  const sb = [...requested.unique_by].sort();
  if (sa.length !== sb.length || sa.some((k, i) => k !== sb[i])) {
    out.push(`unique_by is ${JSON.stringify(stored.unique_by)}, not ${JSON.stringify(requested.unique_by)}`);
  }
  return out;
}
