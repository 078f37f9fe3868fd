/*
 * One behaviour suite for SchemaService and RecordService, run against the in-process services of
 * services/app and against the gRPC client adapters with a real gRPC server (loopback) in front of the
 * very same services: the adapters must be indistinguishable through the ports.
 */
import { randomUUID } from 'node:crypto';
import { pushbaseServices } from '@pushbase/contracts';
import { createRecordService, createSchemaService, MemoryEventLog, MemoryProjection } from '@pushbase/app';
import { DomainError, type DatasetEvent } from '@pushbase/domain';
import { connectRecordService, connectSchemaService, createGrpcServer } from '@pushbase/grpc';
import { BAD_REQUESTS, describeDatasetServicesContract, failure, type DatasetServicesFixture } from './dataset-services.contract';

class FailingLog extends MemoryEventLog {
  mode: 'ok' | 'down' | 'unknown' = 'ok';
  override append(events: readonly DatasetEvent[], encoded?: Uint8Array): Promise<void> {
    if (this.mode === 'down') return Promise.reject(new DomainError('unavailable', 'The event log cannot take writes right now'));
    if (this.mode === 'unknown') return Promise.reject(new DomainError('outcome_unknown', 'Kafka did not confirm the write'));
    return super.append(events, encoded);
  }
}

async function inProcess(): Promise<DatasetServicesFixture> {
  const log = new FailingLog();
  const projection = new MemoryProjection();
  await log.start(projection.apply);
  const clock = { now: () => Date.now() };
  return {
    schemas: createSchemaService({ log, store: projection, clock, ids: { newIncarnation: randomUUID } }),
    records: createRecordService({ schemas: projection, log, clock }),
    events: () => log.events,
    failLog: (mode) => (log.mode = mode),
    cleanup: () => log.close(),
  };
}

const protos = pushbaseServices();

async function overGrpc(): Promise<DatasetServicesFixture> {
  const inner = await inProcess();
  const server = createGrpcServer({ schema: inner.schemas, records: inner.records, log: () => undefined, protos });
  const port = await server.listen('127.0.0.1', 0);
  const schemas = connectSchemaService(`127.0.0.1:${port}`, { protos });
  const records = connectRecordService(`127.0.0.1:${port}`, { protos });
  return {
    schemas,
    records,
    events: inner.events,
    failLog: inner.failLog,
    cleanup: async () => {
      schemas.close();
      records.close();
      await server.shutdown(1_000);
      await inner.cleanup();
    },
  };
}

describeDatasetServicesContract('in-process (services/app)', inProcess);
describeDatasetServicesContract('gRPC adapters in front of them', overGrpc);

describe('the gRPC adapters refuse exactly as the in-process services do', () => {
  it.each(BAD_REQUESTS)('$name: same code, message and path', async ({ run }) => {
    const [local, remote] = await Promise.all([inProcess(), overGrpc()]);
    try {
      const account = `acct-${randomUUID()}`;
      const expected = await failure(run(local, account));
      expect(expected.name).toBe('DomainError');
      expect(await failure(run(remote, account))).toEqual(expected);
    } finally {
      await Promise.all([local.cleanup(), remote.cleanup()]);
    }
  });
});
