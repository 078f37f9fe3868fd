/*
 * The shared token between the gateway and the gRPC services (auth.ts), over real servers and clients on
 * loopback: a call without it or with another one is UNAUTHENTICATED and reaches no handler (the schema
 * service's AccountAdmin included); with it, calls work; health answers without it.
 */
import { pushbaseServices, type AccountCommands, type RecordService, type SchemaService } from '@pushbase/contracts';
import { DomainError } from '@pushbase/domain';
import { connectAccountAdmin, connectRecordService, connectSchemaService, createGrpcServer, jsonLogger, type GrpcClientOptions, type GrpcServer } from '../src';
import { healthClient, summary } from './support';

const protos = pushbaseServices();
const TOKEN = 'grpc-token-of-the-test-0123456789abcdef';

const handled: string[] = [];
const schema: SchemaService = {
  findOrCreate: (req) => (handled.push('findOrCreate'), Promise.resolve({ created: true, dataset: summary(req.account, req.id) })),
  get: (req) => (handled.push('get'), Promise.resolve(summary(req.account, req.id))),
  delete: () => (handled.push('delete'), Promise.resolve({ replayed: false })),
};
const records: RecordService = {
  append: () => (handled.push('append'), Promise.resolve({ replayed: false })),
  replace: () => (handled.push('replace'), Promise.resolve({ replayed: false })),
};
// Only key creation is called here: what an attacker at the port would want.
const accounts = {
  createKeyByHash: (account: string, key: { hash: string; scope: 'read' | 'write'; label: string | null }) => {
    handled.push('createKeyByHash');
    return Promise.resolve({ key_id: key.hash.slice(0, 12), account, scope: key.scope, label: key.label, created_at: '2024-01-01T00:00:00.000Z' });
  },
} as unknown as AccountCommands;

let server: GrpcServer;
let address: string;
const closers: (() => void)[] = [];

beforeAll(async () => {
  server = createGrpcServer({ schema, records, accounts, log: jsonLogger('test', () => undefined), protos, token: TOKEN });
  address = `127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
});
afterAll(async () => {
  for (const close of closers) close();
  await server.shutdown(0);
});
beforeEach(() => handled.splice(0));

/** The three adapters with `opts`, and the status names of their calls as the client saw them. */
function clients(opts: Partial<GrpcClientOptions>) {
  const statuses: string[] = [];
  const o = { protos, metrics: { call: (_s: string, _m: string, code: string) => statuses.push(code) }, ...opts };
  const s = connectSchemaService(address, o);
  const r = connectRecordService(address, o);
  const a = connectAccountAdmin(address, { ...o, newKey: () => 'a-new-key-0123456789abcdef', hashKey: (k) => `hash-of-${k}` });
  closers.push(s.close, r.close, a.close);
  return { schema: s, records: r, accounts: a, statuses };
}

const everyCall = (c: ReturnType<typeof clients>): (() => Promise<unknown>)[] => [
  () => c.schema.get({ account: 'acme', id: 'sales' }),
  () => c.schema.findOrCreate({ account: 'acme', id: 'sales', body: {} }),
  () => c.records.append({ account: 'acme', id: 'sales', json: Buffer.from('{"data":[]}') }),
  () => c.accounts.createKey('acme', { scope: 'write', label: null }),
];

describe('PUSHBASE_GRPC_TOKEN between the gateway and the gRPC services', () => {
  it.each([
    ['no token', {}],
    ['another token', { token: 'another-token-of-32-characters-0123456789' }],
    ['the token with a character more', { token: `${TOKEN}x` }],
  ])('refuses a call with %s: UNAUTHENTICATED, no handler reached, a logged error rather than outcome_unknown', async (_what, opts) => {
    const c = clients(opts);
    for (const call of everyCall(c)) {
      const e = await call().then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(Error);
      expect(e).not.toBeInstanceOf(DomainError);
      expect((e as Error).message).toContain('PUSHBASE_GRPC_TOKEN');
    }
    expect(c.statuses).toEqual(['UNAUTHENTICATED', 'UNAUTHENTICATED', 'UNAUTHENTICATED', 'UNAUTHENTICATED']);
    expect(handled).toEqual([]);
  });

  it('serves a call with the token', async () => {
    const c = clients({ token: TOKEN });
    for (const call of everyCall(c)) await call();
    expect(c.statuses).toEqual(['OK', 'OK', 'OK', 'OK']);
    expect(handled).toEqual(['get', 'findOrCreate', 'append', 'createKeyByHash']);
  });

  it('answers health without a token, for probes and balancers', async () => {
    const health = healthClient(address);
    closers.push(() => health.close());
    await expect(health.check('')).resolves.toBe('SERVING');
    await expect(health.check('pushbase.v1.AccountAdmin')).resolves.toBe('SERVING');
  });
});
