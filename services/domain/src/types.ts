export const FIELD_TYPES = ['date', 'datetime', 'number', 'percentage', 'string', 'money', 'duration'] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

export const TIME_UNITS = ['milliseconds', 'seconds', 'minutes', 'hours'] as const;
export type TimeUnit = (typeof TIME_UNITS)[number];

/** A field as stored: `optional` is always explicit; `currency_code` only on money, `time_unit` only on duration. */
export interface FieldDefinition {
  readonly type: FieldType;
  readonly name: string;
  readonly optional: boolean;
  readonly currency_code?: string;
  readonly time_unit?: TimeUnit;
}

export interface DatasetDefinition {
  readonly fields: Readonly<Record<string, FieldDefinition>>;
  /** Empty when the dataset has no unique key. */
  readonly unique_by: readonly string[];
}

/**
 * A normalised value: numbers for number/percentage/money/duration, `YYYY-MM-DD` for dates, UTC
 * `YYYY-MM-DDThh:mm:ss.sssZ` for datetimes (so string order is time order), strings as given.
 */
export type FieldValue = string | number | null;

/** A normalised record: exactly one key per field of its dataset, a missing optional field is null. */
export type DatasetRecord = Readonly<Record<string, FieldValue>>;

export const LIMITS = Object.freeze({
  fieldsPerDataset: 10,
  recordsPerDataset: 5000,
  recordsPerRequest: 500,
  datasetsPerAccount: 100,
  stringLength: 100,
  datasetIdLength: 100,
  /**
   * A field's name (its label), in Unicode code points. With the other limits it bounds what a definition
   * stores: 10 fields of a 50-character key and a 250-character name are at most about 17 KB of JSON.
   */
  fieldNameLength: 250,
  /** Levels of arrays and objects in a request body; a valid body has 3. */
  jsonDepth: 32,
});
