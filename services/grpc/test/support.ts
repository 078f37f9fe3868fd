import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { credentials, loadPackageDefinition, type Client, type ClientReadableStream, type GrpcObject, type ServiceClientConstructor } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { protoPath as healthProtoPath } from 'grpc-health-check';
import type { DatasetSummary } from '@pushbase/domain';

/** What a fake schema service answers for a dataset: one number field, fixed times. */
export const summary = (account: string, id: string): DatasetSummary => ({
  account,
  id,
  incarnation: 'inc-1',
  definition: { fields: { n: { type: 'number', name: 'N', optional: false } }, unique_by: [] },
  created_at: 1_700_000_000_000,
  updated_at: 1_700_000_000_000,
});

/** A promise with its resolve exposed: lets a test hold a handler until it chooses. */
export function latch<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** A loopback port nothing listens on (bound, then released). */
export async function freePort(): Promise<number> {
  const s = createTcpServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

/** A TCP listener that accepts connections and never says a word: HTTP/2 never gets going over it. */
export async function silentListener(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const s: TcpServer = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return {
    port: (s.address() as AddressInfo).port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((r) => s.close(r));
    },
  };
}

interface HealthResponse {
  status: string;
}
export interface HealthClient {
  check(service: string): Promise<string>;
  /** The statuses a Watch stream reports, as they come. */
  watch(service: string): { statuses: string[]; cancel(): void };
  close(): void;
}

/** A plain grpc.health.v1 client (what a probe or a balancer speaks). */
export function healthClient(address: string): HealthClient {
  const pkg = loadPackageDefinition(loadSync(healthProtoPath, { keepCase: true, enums: String, defaults: true }));
  const Health = ((pkg.grpc as GrpcObject).health as GrpcObject).v1 as GrpcObject;
  const ctor = Health.Health as ServiceClientConstructor;
  const client = new ctor(address, credentials.createInsecure()) as unknown as Client & {
    Check(req: { service: string }, opts: { deadline: number }, cb: (err: Error | null, res?: HealthResponse) => void): void;
    Watch(req: { service: string }): ClientReadableStream<HealthResponse>;
  };
  return {
    check: (service) =>
      new Promise((resolve, reject) => {
        client.Check({ service }, { deadline: Date.now() + 5_000 }, (err, res) => (err !== null ? reject(err) : resolve(res?.status ?? '')));
      }),
    watch: (service) => {
      const statuses: string[] = [];
      const stream = client.Watch({ service });
      stream.on('data', (res: HealthResponse) => statuses.push(res.status));
      // Cancelling ends the stream with a CANCELLED error, which is the point.
      stream.on('error', () => undefined);
      return { statuses, cancel: () => stream.cancel() };
    },
    close: () => client.close(),
  };
}
