import { createKafka } from '@pushbase/kafka';
import { Redis } from 'ioredis';
import type { Endpoint } from './config';

/*
 * "Answers" means the server does its job, not merely that its port is open: Kafka returns cluster
 * metadata (a KRaft broker opens its port before it has registered with its controller), ClickHouse
 * answers /ping, Redis answers PING. Each probe tries once, briefly, and never throws.
 */

export async function kafkaAnswers(e: Endpoint): Promise<boolean> {
  // The services' own client: it also drops the warning kafkajs's timers print under Node 24 and later.
  const admin = createKafka({
    clientId: 'pushbase-services-probe',
    brokers: [`${e.host}:${e.port}`],
    log: () => undefined,
    connectionTimeoutMs: 1000,
    requestTimeoutMs: 3000,
    retry: { retries: 0 },
  }).admin();
  try {
    await admin.connect();
    const cluster = await admin.describeCluster();
    return cluster.brokers.length > 0;
  } catch {
    return false;
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

export async function clickhouseAnswers(e: Endpoint): Promise<boolean> {
  try {
    const res = await fetch(`http://${e.host}:${e.port}/ping`, { signal: AbortSignal.timeout(2000) });
    return res.ok && (await res.text()).startsWith('Ok.');
  } catch {
    return false;
  }
}

export async function redisAnswers(e: Endpoint): Promise<boolean> {
  // No retries and no offline queue: a probe asks once and reports, it never waits for a server to appear.
  const redis = new Redis({
    host: e.host,
    port: e.port,
    lazyConnect: true,
    connectTimeout: 1000,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

/** Polls `answers` until it is true or `deadlineMs` passes; `abort` (the server's process died) ends it early. */
export async function waitUntilAnswering(answers: () => Promise<boolean>, deadlineMs: number, gaveUp: () => string | undefined): Promise<void> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    if (await answers()) return;
    const why = gaveUp();
    if (why !== undefined) throw new Error(why);
    if (Date.now() > end) throw new Error(`did not answer within ${Math.round(deadlineMs / 1000)} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
