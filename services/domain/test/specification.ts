/*
 * A tiny decider specification after Oskar Dudycz: `given(events).when(command).then(events)`.
 * The state is always the fold of the given events (no mocks, no stubs); the command is decided
 * against it with the real decide functions. Each assertion folds afresh, because evolve consumes
 * the state it is given.
 */
import {
  DomainError,
  EVENT_SCHEMA_VERSION,
  decideAppend,
  decideDefine,
  decideDelete,
  decideReplace,
  fold,
  recordsOf,
  type DatasetDefined,
  type DatasetDefinition,
  type DatasetDeleted,
  type DatasetEvent,
  type DatasetRecord,
  type DatasetState,
  type DefineCommand,
  type DomainErrorCode,
  type FieldDefinition,
  type FieldType,
  type RecordsAppended,
  type RecordsReplaced,
  type State,
  type WriteCommand,
} from '../src';

export const ACCOUNT = 'acme';
export const INCARNATION = 'inc-1';
export const AT = 1_700_000_000_000;

export type Command =
  | ({ readonly type: 'DefineDataset' } & DefineCommand)
  | ({ readonly type: 'AppendRecords' } & WriteCommand)
  | ({ readonly type: 'ReplaceRecords' } & WriteCommand)
  | ({ readonly type: 'DeleteDataset' } & Omit<WriteCommand, 'body'>);

/** The decider: one command against the folded state gives the events to record (none when found). */
export function decide(command: Command, state: State): DatasetEvent[] {
  const datasets = state.get(command.account);
  const current = datasets?.get(command.id);
  switch (command.type) {
    case 'DefineDataset': {
      const decision = decideDefine(command, current, datasets?.size ?? 0);
      return decision.outcome === 'created' ? [decision.event] : [];
    }
    case 'AppendRecords':
      return [decideAppend(command, current)];
    case 'ReplaceRecords':
      return [decideReplace(command, current)];
    case 'DeleteDataset':
      return [decideDelete(command, current)];
  }
}

export interface Options {
  readonly account?: string;
  readonly at?: number;
  readonly incarnation?: string;
}

// Commands ------------------------------------------------------------------------------------------

export const defineDataset = (id: string, body: unknown, o: Options = {}): Command => ({
  type: 'DefineDataset',
  account: o.account ?? ACCOUNT,
  id,
  body,
  at: o.at ?? AT,
  newIncarnation: o.incarnation ?? INCARNATION,
});
export const appendRecords = (id: string, body: unknown, o: Options = {}): Command => ({
  type: 'AppendRecords',
  account: o.account ?? ACCOUNT,
  id,
  body,
  at: o.at ?? AT,
});
export const replaceRecords = (id: string, body: unknown, o: Options = {}): Command => ({
  type: 'ReplaceRecords',
  account: o.account ?? ACCOUNT,
  id,
  body,
  at: o.at ?? AT,
});
export const deleteDataset = (id: string, o: Options = {}): Command => ({
  type: 'DeleteDataset',
  account: o.account ?? ACCOUNT,
  id,
  at: o.at ?? AT,
});

// Events --------------------------------------------------------------------------------------------

const base = (id: string, o: Options): Omit<DatasetDeleted, 'type'> => ({
  schema_version: EVENT_SCHEMA_VERSION,
  account: o.account ?? ACCOUNT,
  dataset: id,
  incarnation: o.incarnation ?? INCARNATION,
  at: o.at ?? AT,
});
export const datasetDefined = (id: string, definition: DatasetDefinition, o: Options = {}): DatasetDefined => ({
  type: 'DatasetDefined',
  ...base(id, o),
  definition,
});
export const recordsAppended = (
  id: string,
  records: readonly DatasetRecord[],
  delete_by: string | null = null,
  o: Options = {},
): RecordsAppended => ({ type: 'RecordsAppended', ...base(id, o), records, delete_by });
export const recordsReplaced = (id: string, records: readonly DatasetRecord[], o: Options = {}): RecordsReplaced => ({
  type: 'RecordsReplaced',
  ...base(id, o),
  records,
});
export const datasetDeleted = (id: string, o: Options = {}): DatasetDeleted => ({ type: 'DatasetDeleted', ...base(id, o) });

/** Appends `records` in requests of at most 500, as a client must. */
export function appendedInChunks(id: string, records: readonly DatasetRecord[], delete_by: string | null = null, o: Options = {}): RecordsAppended[] {
  const out: RecordsAppended[] = [];
  for (let i = 0; i < records.length; i += 500) out.push(recordsAppended(id, records.slice(i, i + 500), delete_by, o));
  return out;
}

// The specification ---------------------------------------------------------------------------------

export const datasetIn = (state: State, id: string, account: string = ACCOUNT): DatasetState | undefined => state.get(account)?.get(id);

function recordsIn(state: State, id: string, account: string): DatasetRecord[] {
  const ds = datasetIn(state, id, account);
  if (ds === undefined) throw new Error(`expected dataset ${account}/${id} to exist`);
  return recordsOf(ds);
}

function expectDomainError(run: () => unknown, code: DomainErrorCode, fragment: string, path?: string): DomainError {
  let thrown: unknown;
  let result: unknown;
  try {
    result = run();
  } catch (e) {
    thrown = e;
  }
  if (thrown === undefined) throw new Error(`expected a DomainError "${code}" but got ${JSON.stringify(result)?.slice(0, 300)}`);
  expect(thrown).toBeInstanceOf(DomainError);
  const err = thrown as DomainError;
  if (err.code !== code || !err.message.includes(fragment)) {
    expect({ code: err.code, message: err.message }).toEqual({ code, message: `…${fragment}…` });
  }
  if (path !== undefined) expect(err.path).toBe(path);
  return err;
}

export interface WhenSpecification {
  /** The events decided, exactly. */
  then(expected: readonly DatasetEvent[]): void;
  /** The command is refused with this code and a message containing `fragment` (and this path, when given). */
  thenThrows(code: DomainErrorCode, fragment: string, path?: string): DomainError;
  /** The records of the command's dataset after its events are folded in, oldest insertion first. */
  thenRecords(expected: readonly DatasetRecord[]): void;
  /** The state after the decided events are folded in. */
  thenState(check: (state: State) => void): void;
}

export interface GivenSpecification {
  when(command: Command): WhenSpecification;
  thenState(check: (state: State) => void): void;
  /** The records of dataset `id`, oldest insertion first. */
  thenRecords(id: string, expected: readonly DatasetRecord[], account?: string): void;
  thenNoDataset(id: string, account?: string): void;
}

export function given(events: readonly DatasetEvent[]): GivenSpecification {
  const state = (): State => fold(events);
  const after = (command: Command): State => {
    const s = state();
    return fold(decide(command, s), s);
  };
  return {
    when: (command) => ({
      then: (expected) => expect(decide(command, state())).toStrictEqual(expected),
      thenThrows: (code, fragment, path) => expectDomainError(() => decide(command, state()), code, fragment, path),
      thenRecords: (expected) => expect(recordsIn(after(command), command.id, command.account)).toStrictEqual(expected),
      thenState: (check) => check(after(command)),
    }),
    thenState: (check) => check(state()),
    thenRecords: (id, expected, account = ACCOUNT) => expect(recordsIn(state(), id, account)).toStrictEqual(expected),
    thenNoDataset: (id, account = ACCOUNT) => expect(datasetIn(state(), id, account)).toBeUndefined(),
  };
}

/** A field as stored (optional explicit). */
export const field = (type: FieldType, name: string, extra: Partial<FieldDefinition> = {}): FieldDefinition => ({
  type,
  name,
  optional: false,
  ...extra,
});
