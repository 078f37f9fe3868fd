import type { RecordService, SchemaService } from '@pushbase/contracts';
import { DomainError, LIMITS, type DatasetEvent, type DatasetSummary } from '@pushbase/domain';

/*
 * What the schema and record services promise through their TypeScript ports, whoever implements them:
 * the in-process services of services/app (the embedded mode) and the gRPC client adapters in front of
 * the same services (the distributed mode). Errors are compared whole — code, message, path — because
 * the gateway turns exactly these into the API client's answer.
 */
export interface DatasetServicesFixture {
  readonly schemas: SchemaService;
  readonly records: RecordService;
  /** The events the log has stored, oldest first. */
  readonly events: () => readonly DatasetEvent[];
  /** Makes the log fail every append: `down` (nothing stored), `unknown` (the outcome cannot be told). */
  readonly failLog: (mode: 'ok' | 'down' | 'unknown') => void;
  readonly cleanup: () => Promise<void>;
}

export interface Failure {
  name: string;
  code?: string;
  message: string;
  path?: string;
}

/** The rejection of `p`, reduced to what the gateway reads of it. */
export async function failure(p: Promise<unknown>): Promise<Failure> {
  try {
    await p;
  } catch (e: unknown) {
    if (e instanceof DomainError) return { name: e.name, code: e.code, message: e.message, ...(e.path === undefined ? {} : { path: e.path }) };
    return { name: e instanceof Error ? e.name : typeof e, message: e instanceof Error ? e.message : String(e) };
  }
  throw new Error('Expected a rejection, the call succeeded');
}

/** The summary fields only: the embedded projection answers with the whole dataset state, rows included. */
const summaryOf = ({ account, id, incarnation, definition, created_at, updated_at }: DatasetSummary): DatasetSummary => ({
  account,
  id,
  incarnation,
  definition,
  created_at,
  updated_at,
});

const json = (v: unknown): Uint8Array => Buffer.from(JSON.stringify(v), 'utf8');
const definition = { fields: { day: { type: 'date', name: 'Day' }, amount: { type: 'money', name: 'Amount', currency_code: 'USD', optional: true } }, unique_by: ['day'] };
const other = { fields: { n: { type: 'number', name: 'N' } } };

/** Requests every adapter must refuse with the same error, for the parity check between adapters. */
export const BAD_REQUESTS: readonly { name: string; run: (f: DatasetServicesFixture, account: string) => Promise<unknown> }[] = [
  { name: 'create with a bad id', run: (f, account) => f.schemas.findOrCreate({ account, id: 'Bad Id!', body: definition }) },
  { name: 'create with no body', run: (f, account) => f.schemas.findOrCreate({ account, id: 'd', body: undefined }) },
  { name: 'create with a bad field type', run: (f, account) => f.schemas.findOrCreate({ account, id: 'd', body: { fields: { x: { type: 'colour', name: 'X' } } } }) },
  { name: 'get of a missing dataset', run: (f, account) => f.schemas.get({ account, id: 'missing' }) },
  { name: 'delete of a missing dataset', run: (f, account) => f.schemas.delete({ account, id: 'missing' }) },
  { name: 'append to a missing dataset', run: (f, account) => f.records.append({ account, id: 'missing', json: json({ data: [] }) }) },
  { name: 'append of bad JSON', run: (f, account) => f.records.append({ account, id: 'missing', json: Buffer.from('{"data": [') }) },
  { name: 'replace with a bad id', run: (f, account) => f.records.replace({ account, id: '-x', json: json({ data: [] }) }) },
];

export function describeDatasetServicesContract(name: string, make: () => Promise<DatasetServicesFixture>): void {
  describe(`SchemaService and RecordService: ${name}`, () => {
    let f: DatasetServicesFixture;
    let account: string;
    beforeEach(async () => {
      f = await make();
      account = `acct-${Math.random().toString(36).slice(2, 10)}`;
    });
    afterEach(() => f.cleanup());

    it('creates a dataset once, then finds it with the same incarnation', async () => {
      const first = await f.schemas.findOrCreate({ account, id: 'sales', body: definition });
      expect(first.created).toBe(true);
      expect(first.dataset).toMatchObject({ account, id: 'sales', definition: { unique_by: ['day'] } });
      expect(first.dataset.definition.fields).toEqual({
        day: { type: 'date', name: 'Day', optional: false },
        amount: { type: 'money', name: 'Amount', currency_code: 'USD', optional: true },
      });
      const again = await f.schemas.findOrCreate({ account, id: 'sales', body: definition });
      expect(again.created).toBe(false);
      expect(summaryOf(again.dataset)).toEqual(summaryOf(first.dataset));
      expect(summaryOf(await f.schemas.get({ account, id: 'sales' }))).toEqual(summaryOf(first.dataset));
      expect(f.events().filter((e) => e.account === account).map((e) => e.type)).toEqual(['DatasetDefined']);
    });

    it('refuses a different definition for an existing id with conflict', async () => {
      await f.schemas.findOrCreate({ account, id: 'sales', body: definition });
      expect(await failure(f.schemas.findOrCreate({ account, id: 'sales', body: other }))).toMatchObject({ name: 'DomainError', code: 'conflict' });
    });

    it('deletes: the id is gone, and a new create is a new incarnation', async () => {
      const first = await f.schemas.findOrCreate({ account, id: 'sales', body: definition });
      await f.schemas.delete({ account, id: 'sales' });
      expect(await failure(f.schemas.get({ account, id: 'sales' }))).toEqual({ name: 'DomainError', code: 'not_found', message: 'Dataset not found' });
      expect(await failure(f.schemas.delete({ account, id: 'sales' }))).toMatchObject({ code: 'not_found' });
      const second = await f.schemas.findOrCreate({ account, id: 'sales', body: other });
      expect(second.created).toBe(true);
      expect(second.dataset.incarnation).not.toBe(first.dataset.incarnation);
    });

    it(`refuses dataset ${LIMITS.datasetsPerAccount + 1} of an account with dataset_limit`, async () => {
      for (let i = 0; i < LIMITS.datasetsPerAccount; i++) await f.schemas.findOrCreate({ account, id: `d${i}`, body: other });
      expect(await failure(f.schemas.findOrCreate({ account, id: 'one-more', body: other }))).toMatchObject({ name: 'DomainError', code: 'dataset_limit' });
      // Finding an existing one is not a create.
      await expect(f.schemas.findOrCreate({ account, id: 'd0', body: other })).resolves.toMatchObject({ created: false });
    });

    it('appends and replaces valid records as one event each', async () => {
      const { dataset } = await f.schemas.findOrCreate({ account, id: 'sales', body: definition });
      await f.records.append({ account, id: 'sales', json: json({ data: [{ day: '2024-01-31', amount: 1250 }] }) });
      await f.records.replace({ account, id: 'sales', json: json({ data: [] }) });
      const mine = f.events().filter((e) => e.account === account);
      expect(mine.map((e) => e.type)).toEqual(['DatasetDefined', 'RecordsAppended', 'RecordsReplaced']);
      expect(mine[1]).toMatchObject({ incarnation: dataset.incarnation, records: [{ day: '2024-01-31', amount: 1250 }] });
    });

    it('refuses an invalid record with its path, storing nothing', async () => {
      await f.schemas.findOrCreate({ account, id: 'sales', body: definition });
      const before = f.events().length;
      expect(await failure(f.records.append({ account, id: 'sales', json: json({ data: [{ day: '2024-01-31' }, { day: 'yesterday' }] }) }))).toMatchObject({
        name: 'DomainError',
        code: 'invalid',
        path: 'data[1].day',
      });
      expect(f.events().length).toBe(before);
    });

    it.each(BAD_REQUESTS)('refuses: $name', async ({ run }) => {
      const got = await failure(run(f, account));
      expect(got.name).toBe('DomainError');
      expect(['invalid', 'not_found']).toContain(got.code);
    });

    it('answers unavailable when the log cannot take a write, and stores nothing', async () => {
      await f.schemas.findOrCreate({ account, id: 'sales', body: definition });
      const before = f.events().length;
      f.failLog('down');
      expect(await failure(f.records.append({ account, id: 'sales', json: json({ data: [{ day: '2024-01-31' }] }) }))).toEqual({
        name: 'DomainError',
        code: 'unavailable',
        message: 'The event log cannot take writes right now',
      });
      expect(await failure(f.schemas.findOrCreate({ account, id: 'other', body: other }))).toMatchObject({ code: 'unavailable' });
      expect(f.events().length).toBe(before);
    });

    it('answers outcome_unknown when the log cannot tell whether it stored a write', async () => {
      await f.schemas.findOrCreate({ account, id: 'sales', body: definition });
      f.failLog('unknown');
      expect(await failure(f.records.replace({ account, id: 'sales', json: json({ data: [] }) }))).toEqual({
        name: 'DomainError',
        code: 'outcome_unknown',
        message: 'Kafka did not confirm the write',
      });
      expect(await failure(f.schemas.delete({ account, id: 'sales' }))).toMatchObject({ code: 'outcome_unknown' });
    });
  });
}
