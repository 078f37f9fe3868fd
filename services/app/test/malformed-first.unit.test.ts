/*
 * A malformed request is refused 400 whatever the state of its dataset: also while the store cannot say
 * (distributed: a change of the dataset is pending, or Redis is down), which used to answer 503 first.
 */
import type { EventAppender, SchemaStore } from '@pushbase/contracts';
import { DomainError, type DatasetEvent } from '@pushbase/domain';
import { createRecordService, createSchemaService, MemoryEventLog } from '../src';

const pending = (): Promise<never> => Promise.reject(new DomainError('unavailable', 'A change of this dataset is being completed; nothing was written, try again in a moment'));
const store: SchemaStore = { get: pending, count: pending };
const clock = { now: () => 1_700_000_000_000 };
const json = (body: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(body));

describe('a write while the schema store cannot answer', () => {
  const sent: DatasetEvent[] = [];
  const log: EventAppender = {
    append: (events) => {
      sent.push(...events);
      return Promise.resolve();
    },
    close: () => Promise.resolve(),
  };
  const records = createRecordService({ schemas: store, log, clock });
  afterEach(() => expect(sent).toEqual([]));

  it.each<[string, unknown, string]>([
    ['data that is no array', { data: 0, delete_by: 'day' }, 'data'],
    ['no data', {}, 'data'],
    ['a record that is no object', { data: [{ n: 1 }, 'n'] }, 'data[1]'],
    ['a delete_by of the wrong shape', { data: [], delete_by: 7 }, 'delete_by'],
  ])('refuses a body with %s as invalid, not unavailable', async (_name, body, path) => {
    await expect(records.append({ account: 'acme', id: 'ds', json: json(body) })).rejects.toMatchObject({ code: 'invalid', path });
  });

  it('refuses a body that is not JSON, or nested too deep, as invalid', async () => {
    for (const raw of ['{"data": [', `{"data":${'['.repeat(100)}${']'.repeat(100)}}`]) {
      await expect(records.replace({ account: 'acme', id: 'ds', json: new TextEncoder().encode(raw) })).rejects.toMatchObject({ code: 'invalid' });
    }
  });

  it('answers a well-formed write with the store’s error: only the dataset could tell whether its records fit', async () => {
    await expect(records.append({ account: 'acme', id: 'ds', json: json({ data: [{ n: 1 }], delete_by: 'day' }) })).rejects.toMatchObject({ code: 'unavailable' });
    await expect(records.replace({ account: 'acme', id: 'ds', json: json({ data: [] }) })).rejects.toMatchObject({ code: 'unavailable' });
  });
});

describe('a definition while the schema store cannot answer', () => {
  const schemas = createSchemaService({ store, clock, ids: { newIncarnation: () => 'inc' }, log: new MemoryEventLog() });

  it('refuses an invalid definition as invalid, not unavailable', async () => {
    await expect(schemas.findOrCreate({ account: 'acme', id: 'ds', body: { fields: { n: { type: 'text', name: 'N' } } } })).rejects.toMatchObject({ code: 'invalid', path: 'fields.n.type' });
  });

  it('answers a valid one with the store’s error', async () => {
    await expect(schemas.findOrCreate({ account: 'acme', id: 'ds', body: { fields: { n: { type: 'number', name: 'N' } } } })).rejects.toMatchObject({ code: 'unavailable' });
  });
});
