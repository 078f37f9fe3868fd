import type { AccountView, KeyView } from '@pushbase/contracts';
import type { AccountQuotas, DatasetSummary, QuotaChange, FieldDefinition, FieldType, QuotaLimits, TimeUnit } from '@pushbase/domain';
import { effectiveQuotas, FIELD_TYPES, TIME_UNITS } from '@pushbase/domain';

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

/*
 * Accounts and keys (proto/pushbase/v1/accounts.proto). A quota of 0 on the wire is the domain's null
 * ("the server's default"); created_at travels as epoch milliseconds, shown as ISO text in the views.
 */
export interface QuotasMessage {
  datasets: number;
  requests_per_minute: number;
}
export interface AccountMessage {
  account: string;
  created_at: number;
  quotas: QuotasMessage | null;
  key_count: number;
}
export interface KeyMessage {
  key_id: string;
  account: string;
  scope: string;
  label: string;
  has_label: boolean;
  created_at: number;
}

/** QuotaChange: a field absent keeps the quota; 0 puts it back to the default. */
export interface QuotaChangeMessage {
  datasets?: number;
  requests_per_minute?: number;
}
export const quotaChangeToMessage = (c: QuotaChange): QuotaChangeMessage => ({
  ...(c.datasets === undefined ? {} : { datasets: c.datasets ?? 0 }),
  ...(c.requests_per_minute === undefined ? {} : { requests_per_minute: c.requests_per_minute ?? 0 }),
});
export const quotaChangeFromMessage = (m: QuotaChangeMessage): QuotaChange => ({
  ...(m.datasets === undefined ? {} : { datasets: m.datasets === 0 ? null : m.datasets }),
  ...(m.requests_per_minute === undefined ? {} : { requests_per_minute: m.requests_per_minute === 0 ? null : m.requests_per_minute }),
});

export const quotasToMessage = (q: AccountQuotas): QuotasMessage => ({ datasets: q.datasets ?? 0, requests_per_minute: q.requests_per_minute ?? 0 });
export const quotasFromMessage = (m: QuotasMessage | null | undefined): AccountQuotas => ({
  datasets: m === null || m === undefined || m.datasets === 0 ? null : m.datasets,
  requests_per_minute: m === null || m === undefined || m.requests_per_minute === 0 ? null : m.requests_per_minute,
});

export const accountToMessage = (v: AccountView): AccountMessage => ({
  account: v.account,
  created_at: Date.parse(v.created_at),
  quotas: quotasToMessage(v.quotas),
  key_count: v.key_count,
});

/** The view of an account, its quotas in force computed with `defaults` (the caller's: a gateway's own rate limit). */
export function accountFromMessage(m: AccountMessage | null | undefined, defaults?: QuotaLimits): AccountView {
  if (m === null || m === undefined) throw new Error('The answer carries no account');
  const quotas = quotasFromMessage(m.quotas);
  return { account: m.account, created_at: new Date(m.created_at).toISOString(), quotas, effective_quotas: effectiveQuotas(quotas, defaults), key_count: m.key_count };
}

export const keyToMessage = (k: KeyView): KeyMessage => ({
  key_id: k.key_id,
  account: k.account,
  scope: k.scope,
  label: k.label ?? '',
  has_label: k.label !== null,
  created_at: Date.parse(k.created_at),
});

export function keyFromMessage(m: KeyMessage | null | undefined): KeyView {
  if (m === null || m === undefined) throw new Error('The answer carries no key');
  return { key_id: m.key_id, account: m.account, scope: m.scope === 'read' ? 'read' : 'write', label: m.has_label ? m.label : null, created_at: new Date(m.created_at).toISOString() };
}
