/*
 * The behaviour suite of SchemaService and RecordService (dataset-services.contract.ts) against the
 * distributed schema service: its decisions from the Redis schema store, its changes through the Redis
 * lease and intent (services/schema), behind its gRPC server and reached through the gRPC adapter, as the
 * gateway reaches it. The event log is in memory (so the suite can make it fail at will); Redis is real.
 * And the refusals compared whole with the embedded mode's, as the gateway turns exactly these into answers.
 */
import { randomUUID } from 'node:crypto';
import { createRecordService, createSchemaService, MemoryEventLog, MemoryProjection } from '@pushbase/app';
import { pushbaseServices } from '@pushbase/contracts';
import { DomainError, type DatasetEvent } from '@pushbase/domain';
import { connectSchemaService } from '@pushbase/grpc';
import { RedisSchemaStore } from '@pushbase/redis';
import { createSchemaServer } from '@pushbase/schema';
import type { Redis } from 'ioredis';
import { connectTestRedis, deleteUnder, randomPrefix } from '../helpers/redis';
import { BAD_REQUESTS, describeDatasetServicesContract, failure, type DatasetServicesFixture } from './dataset-services.contract';

class FailingLog extends MemoryEventLog {
  mode: 'ok' | 'down' | 'unknown' = 'ok';
  override append(events: readonly DatasetEvent[], encoded?: Uint8Array): Promise<void> {
    if (this.mode === 'down') return Promise.reject(new DomainError('unavailable', 'The event log cannot take writes right now'));
    if (this.mode === 'unknown') return Promise.reject(new DomainError('outcome_unknown', 'Kafka did not confirm the write'));
    return super.append(events, encoded);
  }
}

const protos = pushbaseServices();

async function distributedSchema(): Promise<DatasetServicesFixture> {
  const redis: Redis = await connectTestRedis();
  const prefix = randomPrefix();
  const log = new FailingLog();
  const server = createSchemaServer({ redis, prefix, appender: log, lock: { ttlMs: 30_000, waitMs: 10_000 }, log: () => undefined, protos });
  const port = await server.grpc.listen('127.0.0.1', 0);
  const schemas = connectSchemaService(`127.0.0.1:${port}`, { protos });
  const clock = { now: () => Date.now() };
  return {
    schemas,
    // The records service as the distributed one decides: from the Redis schema store the schema service wrote.
    records: createRecordService({ schemas: new RedisSchemaStore(redis, { prefix }), log, clock }),
    events: () => log.events,
    failLog: (mode) => (log.mode = mode),
    cleanup: async () => {
      schemas.close();
      await server.grpc.shutdown(1_000);
      await log.close();
      await deleteUnder(redis, prefix);
      redis.disconnect();
    },
  };
}

async function embedded(): Promise<DatasetServicesFixture> {
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

describeDatasetServicesContract('the distributed schema service over gRPC (Redis store, lease and intent)', distributedSchema);

describe('the distributed schema service refuses exactly as the embedded one does', () => {
  it.each(BAD_REQUESTS)('$name: same code, message and path', async ({ run }) => {
    const [local, remote] = await Promise.all([embedded(), distributedSchema()]);
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
