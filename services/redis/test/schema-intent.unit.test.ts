import { EVENT_SCHEMA_VERSION } from '@pushbase/domain';
import { decodeSchemaIntent, encodeSchemaIntent, pendingFor, schemaIntentKey, type SchemaChangeEvent, type SchemaIntent } from '../src';

/*
 * When the schema intent left in Redis must hold a lock-free reader back (services/redis/src/schema-intent.ts):
 * only for its own dataset, and only while the store does not show its event yet.
 */

const base = { schema_version: EVENT_SCHEMA_VERSION, account: 'acme', dataset: 'x', at: 1 } as const;
const deleted: SchemaChangeEvent = { ...base, type: 'DatasetDeleted', incarnation: 'inc-a' };
const defined: SchemaChangeEvent = { ...base, type: 'DatasetDefined', incarnation: 'inc-b', definition: { fields: { n: { type: 'number', name: 'N', optional: false } }, unique_by: [] } };
const intent = (event: SchemaChangeEvent): SchemaIntent => ({ token: 't', event });

describe('pendingFor', () => {
  it.each([
    ['no intent', undefined, 'x', 'inc-a', false],
    ['a deletion of the live incarnation', intent(deleted), 'x', 'inc-a', true],
    ['a deletion the store already shows (not live)', intent(deleted), 'x', undefined, false],
    ['a deletion, another incarnation live since', intent(deleted), 'x', 'inc-c', false],
    ['a deletion of another dataset', intent(deleted), 'y', 'inc-a', false],
    ['a definition not yet in the store', intent(defined), 'x', undefined, true],
    ['a definition while an older incarnation shows', intent(defined), 'x', 'inc-a', true],
    ['a definition the store already shows', intent(defined), 'x', 'inc-b', false],
    ['a definition of another dataset', intent(defined), 'y', undefined, false],
  ] as const)('%s → %s', (_, i, id, live, expected) => {
    expect(pendingFor(i, id, live)).toBe(expected);
  });
});

describe('the intent as stored', () => {
  it('round-trips and lives outside the schema store namespace', () => {
    expect(decodeSchemaIntent(encodeSchemaIntent(intent(defined)))).toEqual(intent(defined));
    expect(schemaIntentKey('pb:', 'acct:1')).toBe('pb:schema-intent:acct:1');
    expect(() => decodeSchemaIntent('{"token":"t"}')).toThrow('Not a schema intent');
  });
});
