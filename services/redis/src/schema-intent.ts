import type { AccountEvent, DatasetDefined, DatasetDeleted } from '@pushbase/domain';
import { isAccountEvent } from './account-store';
import { checkPrefix } from './keys';

/*
 * The schema service's write-ahead intent, `<prefix>schema-intent:<account>`: the change an account's lease
 * holder decided, written before the event goes to Kafka and removed once the store shows it. While it is
 * there the store may be stale, so readers without the lease read it beside the dataset and hold back. Kept
 * outside `<prefix>schema:` so replay's swap leaves it alone. The protocol: docs/architecture.md → Schema
 * changes.
 */

/** The events a schema decision makes. */
export type SchemaChangeEvent = DatasetDefined | DatasetDeleted;

export interface SchemaIntent {
  /** The token of the lease under which it was written. */
  readonly token: string;
  /**
   * A dataset's change, or an account's (the schema service decides account and key changes under the same
   * lease and the same protocol; their event goes to the accounts topic and the account store).
   */
  readonly event: SchemaChangeEvent | AccountEvent;
}

/** Every intent key under `prefix` starts with this (the account follows). */
export const schemaIntentNamespace = (prefix: string): string => `${checkPrefix(prefix)}schema-intent:`;

export const schemaIntentKey = (prefix: string, account: string): string => `${schemaIntentNamespace(prefix)}${account}`;

export const encodeSchemaIntent = (intent: SchemaIntent): string => JSON.stringify({ token: intent.token, event: intent.event });

/** Only this module and the schema service write intents, so the shape is trusted once it is an object with an event. */
export function decodeSchemaIntent(raw: string): SchemaIntent {
  const parsed = JSON.parse(raw) as Partial<SchemaIntent> | null;
  if (parsed === null || typeof parsed !== 'object' || typeof parsed.event !== 'object' || parsed.event === null) {
    throw new Error(`Not a schema intent: ${raw.slice(0, 200)}`);
  }
  return parsed as SchemaIntent;
}

/**
 * Whether `intent` is a change of dataset `id` that the store, whose live incarnation of `id` is
 * `liveIncarnation`, does not show yet. An intent of another dataset of the account does not matter to
 * `id`. One the store already shows (the projector applied the event from the log before the holder's
 * successor rolled it forward, or only the intent's removal failed) changes nothing a reader could see:
 * a deletion whose incarnation is no longer live, a definition whose incarnation is.
 */
export function pendingFor(intent: SchemaIntent | undefined, id: string, liveIncarnation: string | undefined): boolean {
  // An account's change (a key, a quota) changes no dataset: a reader of a dataset need not wait for it.
  if (intent === undefined || isAccountEvent(intent.event) || intent.event.dataset !== id) return false;
  return intent.event.type === 'DatasetDeleted' ? liveIncarnation === intent.event.incarnation : liveIncarnation !== intent.event.incarnation;
}
