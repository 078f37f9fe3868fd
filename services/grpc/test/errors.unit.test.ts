/*
 * Both directions of the error mapping, every domain code: DomainError → gRPC status (server side) and
 * gRPC status → DomainError (client adapters), and what a transport failure becomes for a read and a write.
 */
import { Metadata, status as Status } from '@grpc/grpc-js';
import { DomainError, type DomainErrorCode } from '@pushbase/domain';
import { ERROR_CODE_KEY, ERROR_PATH_KEY, INTERNAL_DETAILS, fromGrpcError, provenNeverSent, toGrpcStatus, type CallKind } from '../src';

const EXPECTED: Record<DomainErrorCode, Status> = {
  invalid: Status.INVALID_ARGUMENT,
  not_found: Status.NOT_FOUND,
  conflict: Status.ALREADY_EXISTS,
  dataset_limit: Status.RESOURCE_EXHAUSTED,
  unavailable: Status.UNAVAILABLE,
  outcome_unknown: Status.UNKNOWN,
  idempotency_mismatch: Status.FAILED_PRECONDITION,
  idempotency_in_flight: Status.ABORTED,
};
const CODES = Object.keys(EXPECTED) as DomainErrorCode[];
const KINDS: CallKind[] = ['read', 'write'];

const transport = (code: Status, details: string) => ({ code, details, metadata: new Metadata() });

describe('domain code → gRPC status (server side)', () => {
  it.each(CODES)('%s maps to its status, with the code and path in the trailers and the message as details', (code) => {
    const s = toGrpcStatus(new DomainError(code, `message of ${code}`, 'data[3].amount'));
    expect(s.code).toBe(EXPECTED[code]);
    expect(s.details).toBe(`message of ${code}`);
    expect(s.metadata.get(ERROR_CODE_KEY)).toEqual([code]);
    expect(s.metadata.get(ERROR_PATH_KEY)).toEqual([Buffer.from('data[3].amount')]);
  });

  it('sends no path trailer when the error has no path', () => {
    expect(toGrpcStatus(new DomainError('not_found', 'gone')).metadata.get(ERROR_PATH_KEY)).toEqual([]);
  });

  it('never puts an HTTP number in the status', () => {
    for (const code of CODES) expect([400, 404, 409, 422, 500, 503]).not.toContain(toGrpcStatus(new DomainError(code, 'x')).code);
  });

  it.each([new TypeError('secret internals at /srv/pushbase/x.ts:12'), 'a string', undefined, { code: 'invalid', message: 'looks domain-like' }])(
    'anything but a DomainError is INTERNAL with a fixed message and no trailer: %p',
    (err) => {
      const s = toGrpcStatus(err);
      expect(s.code).toBe(Status.INTERNAL);
      expect(s.details).toBe(INTERNAL_DETAILS);
      expect(s.details).not.toMatch(/secret|\.ts|at /);
      expect(s.metadata.get(ERROR_CODE_KEY)).toEqual([]);
    },
  );
});

describe('gRPC status → DomainError (client adapters)', () => {
  it.each(CODES.flatMap((code) => KINDS.map((kind) => [code, kind] as const)))('%s round-trips through the trailers for a %s', (code, kind) => {
    const back = fromGrpcError(toGrpcStatus(new DomainError(code, `message of ${code}`, 'fields.day.type')), kind, 'schema');
    expect(back).toBeInstanceOf(DomainError);
    expect(back).toMatchObject({ code, message: `message of ${code}`, path: 'fields.day.type' });
  });

  it('carries a path of any Unicode (the client’s own keys), and reads an older service’s text path', () => {
    const path = 'data[0].ø\u{1F600}\r\n';
    expect(() => toGrpcStatus(new DomainError('invalid', 'x', path))).not.toThrow();
    expect(fromGrpcError(toGrpcStatus(new DomainError('invalid', 'x', path)), 'write', 'records')).toMatchObject({ path });
    const older = new Metadata();
    older.set(ERROR_CODE_KEY, 'invalid');
    older.set('pushbase-error-path', 'data[1].n');
    expect(fromGrpcError({ code: Status.INVALID_ARGUMENT, details: 'x', metadata: older }, 'write', 'records')).toMatchObject({ path: 'data[1].n' });
  });

  it('keeps a missing path missing', () => {
    const back = fromGrpcError(toGrpcStatus(new DomainError('conflict', 'differs')), 'write', 'schema') as DomainError;
    expect(back.path).toBeUndefined();
  });

  // The exact texts grpc-js 1.14 gives a call that never left the client (see provenNeverSent).
  const neverSent = [
    transport(Status.UNAVAILABLE, 'No connection established. Last error: connect ECONNREFUSED 127.0.0.1:1. Resolution note: '),
    transport(Status.UNAVAILABLE, 'round_robin: No connection established. Last error: null'),
    transport(Status.UNAVAILABLE, 'No connection established'),
    transport(Status.UNAVAILABLE, 'Stream refused by server'),
    transport(Status.DEADLINE_EXCEEDED, 'Deadline exceeded after 2.002s,name resolution: 0.001s,Waiting for LB pick'),
  ];
  // May have reached the handler.
  const maybeSent = [
    transport(Status.UNAVAILABLE, 'Connection dropped'),
    transport(Status.DEADLINE_EXCEEDED, 'Deadline exceeded after 2.002s,LB pick: 0.001s,remote_addr=127.0.0.1:5000'),
    transport(Status.CANCELLED, 'Call cancelled'),
    transport(Status.INTERNAL, 'Received RST_STREAM with code 2 triggered by internal client error: Protocol error'),
    transport(Status.UNKNOWN, 'Unknown failure'),
    // A status of the service's without our trailer (a proxy, or a server draining) proves nothing either.
    transport(Status.UNAVAILABLE, 'Server shutting down'),
  ];

  it.each(neverSent)('a call proven never sent is unavailable, read or write: $details', (err) => {
    expect(provenNeverSent(err)).toBe(true);
    for (const kind of KINDS) expect(fromGrpcError(err, kind, 'records')).toMatchObject({ name: 'DomainError', code: 'unavailable' });
  });

  it.each(maybeSent)('a write that may have reached the service is outcome_unknown: $details', (err) => {
    expect(provenNeverSent(err)).toBe(false);
    const e = fromGrpcError(err, 'write', 'records');
    expect(e).toMatchObject({ name: 'DomainError', code: 'outcome_unknown' });
    expect(e.message).toContain('records');
  });

  it.each([Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED, Status.CANCELLED, Status.UNKNOWN])('a read failing with %s is unavailable', (code) => {
    expect(fromGrpcError(transport(code, 'Connection dropped'), 'read', 'schema')).toMatchObject({ name: 'DomainError', code: 'unavailable' });
  });

  it.each([Status.INTERNAL, Status.UNIMPLEMENTED])('a read failing with %s is a plain error (a 500 that gets logged), not an outage', (code) => {
    const e = fromGrpcError(transport(code, 'boom'), 'read', 'schema');
    expect(e).not.toBeInstanceOf(DomainError);
    expect(e.message).toContain('schema');
  });

  it('an unknown trailer code (a newer server) counts as no trailer', () => {
    const metadata = new Metadata();
    metadata.set(ERROR_CODE_KEY, 'some_future_code');
    expect(fromGrpcError({ code: Status.INVALID_ARGUMENT, details: 'x', metadata }, 'write', 'schema')).toMatchObject({ code: 'outcome_unknown' });
  });
});
