import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { createKafka, parseBrokers, type KafkaLogLevel } from '../src/connection';

describe('Kafka connection settings', () => {
  it('parses a broker list and refuses what is not host:port', () => {
    expect(parseBrokers('127.0.0.1:9092')).toEqual(['127.0.0.1:9092']);
    expect(parseBrokers(' a:1 , b.example:9093,,[::1]:9094 ')).toEqual(['a:1', 'b.example:9093', '[::1]:9094']);
    expect(() => parseBrokers(' , ')).toThrow(/No Kafka broker/);
    expect(() => parseBrokers('localhost')).toThrow(/"localhost" is not host:port/);
    expect(() => parseBrokers('a:1,b c:2')).toThrow(/"b c:2"/);
  });

  it("passes kafkajs's warnings and errors on, and demotes the answers kafkajs retries to info", () => {
    const lines: [KafkaLogLevel, string][] = [];
    const kafka = createKafka({ brokers: ['127.0.0.1:1'], log: (level, message) => void lines.push([level, message]) });
    const connection = kafka.logger().namespace('Connection');
    connection.error('Response ListOffsets(key: 2, version: 3)', { error: 'This server is not the leader for that topic-partition' });
    connection.error('Response JoinGroup(key: 11, version: 5)', { error: 'The group is rebalancing, so a rejoin is needed' });
    kafka.logger().namespace('Producer').warn('Limiting retries for the idempotent producer may invalidate EoS guarantees');
    connection.error('Response Produce(key: 0, version: 7)', { error: 'The request included a message larger than the max message size the server will accept' });
    kafka.logger().namespace('Consumer').warn('something else');
    kafka.logger().namespace('Consumer').info('Consumer has joined the group');
    expect(lines).toEqual([
      ['error', 'Connection: Response Produce(key: 0, version: 7) {"error":"The request included a message larger than the max message size the server will accept"}'],
      ['warn', 'Consumer: something else'],
    ]);

    const all: KafkaLogLevel[] = [];
    const verbose = createKafka({ brokers: ['127.0.0.1:1'], logLevel: 'info', log: (level) => void all.push(level) });
    verbose.logger().namespace('Connection').error('Response ListOffsets(key: 2, version: 3)', { error: 'This server is not the leader for that topic-partition' });
    expect(all).toEqual(['info']);
  });

  it("drops the negative-timer warning kafkajs causes after every response, and no other warning", () => {
    // A child: Node prints a TimeoutNegativeWarning once per process (since Node 24). kafkajs's request
    // queue sets such a timer whenever no broker throttles; here it is driven without a broker.
    const script = `
      const { createKafka } = require(${JSON.stringify(path.resolve(__dirname, '../src/connection.ts'))});
      const RequestQueue = require('kafkajs/src/network/requestQueue');
      createKafka({ brokers: ['127.0.0.1:1'] });
      const queue = new RequestQueue({ maxInFlightRequests: 1, requestTimeout: 1000, clientId: 'c', broker: 'b', logger: { debug() {}, warn() {} } });
      queue.scheduleCheckPendingRequests();
      setTimeout(() => process.emitWarning('-5 is a negative number.', 'TimeoutNegativeWarning'), 20);
      setTimeout(() => clearTimeout(queue.throttleCheckTimeoutId), 40);`;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], { encoding: 'utf8' });
    expect(child.status).toBe(0);
    // Only the warning pushbase's own code would have caused.
    expect(child.stderr.match(/TimeoutNegativeWarning/g)).toEqual(['TimeoutNegativeWarning']);
    expect(child.stderr).toMatch(/TimeoutNegativeWarning: -5 is a negative number/);
  });
});
