import type { DatasetSummary, FieldDefinition, FieldType, TimeUnit } from '@pushbase/domain';
import { FIELD_TYPES, TIME_UNITS } from '@pushbase/domain';

/*
 * DatasetSummary as decoded by proto-loader with the one option set (services/contracts/src/proto.ts):
 * snake_case names, enums by name, int64 as numbers, unset scalars as their defaults.
 */
export interface FieldDefinitionMessage {
  type: string;
  name: string;
  optional: boolean;
  currency_code: string;
  time_unit: string;
}
export interface DatasetSummaryMessage {
  account: string;
  id: string;
  incarnation: string;
  definition: { fields: Record<string, FieldDefinitionMessage>; unique_by: string[] } | null;
  created_at: number;
  updated_at: number;
}

const FIELD_TYPE_PREFIX = 'FIELD_TYPE_';
const TIME_UNIT_PREFIX = 'TIME_UNIT_';
const TIME_UNIT_UNSPECIFIED = 'TIME_UNIT_UNSPECIFIED';

function fieldToMessage(f: FieldDefinition): FieldDefinitionMessage {
  return {
    type: FIELD_TYPE_PREFIX + f.type.toUpperCase(),
    name: f.name,
    optional: f.optional,
    currency_code: f.currency_code ?? '',
    time_unit: f.time_unit === undefined ? TIME_UNIT_UNSPECIFIED : TIME_UNIT_PREFIX + f.time_unit.toUpperCase(),
  };
}

export function summaryToMessage(ds: DatasetSummary): DatasetSummaryMessage {
  return {
    account: ds.account,
    id: ds.id,
    incarnation: ds.incarnation,
    definition: {
      fields: Object.fromEntries(Object.entries(ds.definition.fields).map(([key, f]) => [key, fieldToMessage(f)])),
      unique_by: [...ds.definition.unique_by],
    },
    created_at: ds.created_at,
    updated_at: ds.updated_at,
  };
}

const fieldType = (name: string): FieldType => {
  const type = FIELD_TYPES.find((t) => FIELD_TYPE_PREFIX + t.toUpperCase() === name);
  if (type === undefined) throw new Error(`Unknown field type ${name} in a DatasetSummary message`);
  return type;
};
const timeUnit = (name: string): TimeUnit | undefined => {
  if (name === TIME_UNIT_UNSPECIFIED || name === '') return undefined;
  const unit = TIME_UNITS.find((u) => TIME_UNIT_PREFIX + u.toUpperCase() === name);
  if (unit === undefined) throw new Error(`Unknown time unit ${name} in a DatasetSummary message`);
  return unit;
};

/** The domain's FieldDefinition has `currency_code` only on money and `time_unit` only on duration. */
function fieldFromMessage(m: FieldDefinitionMessage): FieldDefinition {
  const unit = timeUnit(m.time_unit);
  return {
    type: fieldType(m.type),
    name: m.name,
    optional: m.optional,
    ...(m.currency_code === '' ? {} : { currency_code: m.currency_code }),
    ...(unit === undefined ? {} : { time_unit: unit }),
  };
}

export function summaryFromMessage(m: DatasetSummaryMessage | null | undefined): DatasetSummary {
  if (m === null || m === undefined) throw new Error('The answer carries no dataset');
  return {
    account: m.account,
    id: m.id,
    incarnation: m.incarnation,
    definition: {
      fields: Object.fromEntries(Object.entries(m.definition?.fields ?? {}).map(([key, f]) => [key, fieldFromMessage(f)])),
      unique_by: [...(m.definition?.unique_by ?? [])],
    },
    created_at: m.created_at,
    updated_at: m.updated_at,
  };
}
