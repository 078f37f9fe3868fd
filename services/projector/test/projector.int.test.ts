/*
 * The projector against real Kafka and ClickHouse. Random streams (bounded fast-check runs) are produced
 * to a topic of this suite's own and projected; ClickHouse must then show exactly the domain fold, also
 * after redelivery, a SIGKILL between a write and its commit, with two members in one group, and with a
 * memory bound so small that every dataset is dropped and loaded back again and again.
 */
import fc from 'fast-check';
import { randomBytes } from 'node:crypto';
import type { DatasetEvent } from '@pushbase/domain';
import { eventsOf, stepsArb } from './event-sequences';
import {
  committed,
  endsOf,
  eventually,
  expectProjectionEqualsFold,
  infra,
  produce,
  randomName,
  runChild,
  startProjector,
  tableOf,
  untilCommitted,
  type Infra,
} from './support';

jest.setTimeout(240_000);

const DATASETS = ['sales', 'visits', 'orders'] as const;
const streamArb = stepsArb(DATASETS.length, 30);
const newAccount = (): string => `acct-${randomBytes(5).toString('hex')}`;
const streamFor = (steps: Parameters<typeof eventsOf>[0], account: string): DatasetEvent[] => eventsOf(steps, { account, datasets: DATASETS, incarnationPrefix: account });

let env: Infra;
beforeAll(async () => {
  env = await infra(3);
});
afterAll(async () => {
  await env?.close();
});

describe('projector (real Kafka and ClickHouse)', () => {
  it('projects random event streams to exactly the domain fold, and redelivering a random suffix changes nothing', async () => {
    const group = randomName('pb-proj-group');
    let projector = await startProjector(env, group);
    try {
      await fc.assert(
        fc.asyncProperty(streamArb, fc.nat(), async (steps, cut) => {
          const account = newAccount();
          const events = streamFor(steps, account);
          const positions = await produce(env.appender, events);
          await untilCommitted(env.admin, group, env.topic, endsOf(positions));
          await expectProjectionEqualsFold(env.readModel, events, account, DATASETS);

          // Redelivery: a fresh member (nothing in memory) is sent back to an earlier offset.
          const before = await tableOf(env, account);
          await projector.stop();
          const from = positions[cut % positions.length]!;
          await env.admin.setOffsets({ groupId: group, topic: env.topic, partitions: [{ partition: from.partition, offset: String(from.offset) }] });
          projector = await startProjector(env, group);
          await untilCommitted(env.admin, group, env.topic, endsOf(positions));
          await eventually(() => projector.projector.stats().events > 0, { what: 'the redelivered events to be read' });
          // Everything redelivered is at or before a stored position, or changes nothing: no row is written.
          expect(projector.projector.stats().rows).toBe(0);
          expect(await tableOf(env, account)).toStrictEqual(before);
          await expectProjectionEqualsFold(env.readModel, events, account, DATASETS);
        }),
        { numRuns: 3, endOnFailure: true },
      );
    } finally {
      await projector.stop();
    }
  });

  it('ends as the fold after being killed (SIGKILL) between a write and its commit, then restarted', async () => {
    const group = randomName('pb-proj-group');
    await fc.assert(
      fc.asyncProperty(streamArb, fc.constantFrom('1', '40', '300'), async (steps, flushRows) => {
        const account = newAccount();
        const events = streamFor(steps, account);
        const positions = await produce(env.appender, events);
        const ends = endsOf(positions);
        // The child dies right after its first write landed: small writes put that in the middle of the
        // stream, and whatever the write covered is not committed.
        const child = await runChild({ ...env.env(group, { PUSHBASE_PROJECTOR_FLUSH_ROWS: flushRows }), PUSHBASE_TEST_KILL_AFTER_WRITE: '1' });
        expect({ signal: child.signal, killed: child.lines.some((l) => l.includes('killing myself after write')) }).toStrictEqual({ signal: 'SIGKILL', killed: true });
        const at = await committed(env.admin, group, env.topic);
        expect([...ends].some(([p, end]) => (at.get(p) ?? -1) < end)).toBe(true);
        const restarted = await startProjector(env, group);
        try {
          await untilCommitted(env.admin, group, env.topic, ends);
        } finally {
          await restarted.stop();
        }
        await expectProjectionEqualsFold(env.readModel, events, account, DATASETS);
      }),
      { numRuns: 3, endOnFailure: true },
    );
  });

  it('two projectors in one group share the partitions and end with the state one gives', async () => {
    const group = randomName('pb-proj-group');
    const a = await startProjector(env, group);
    const b = await startProjector(env, group);
    try {
      await eventually(() => [a, b].every((m) => m.lines.some((l) => l.includes('partitions assigned'))), { what: 'both members to hold partitions', timeoutMs: 60_000 });
      const account = newAccount();
      const streams = fc.sample(streamArb, { numRuns: 3, seed: Date.now() % 1_000_000 });
      // Many datasets, so both members' partitions get events.
      const datasets = DATASETS.flatMap((d) => [0, 1, 2, 3].map((i) => `${d}-${i}`));
      const events = streams.flatMap((steps, i) => eventsOf(steps, { account, datasets: datasets.slice(i * 4, i * 4 + 4), incarnationPrefix: `${account}-${i}` }));
      const positions = await produce(env.appender, events);
      await untilCommitted(env.admin, group, env.topic, endsOf(positions), 120_000);
      await expectProjectionEqualsFold(env.readModel, events, account, datasets);
      expect(a.projector.stats().events).toBeGreaterThan(0);
      expect(b.projector.stats().events).toBeGreaterThan(0);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('with a memory bound of 50 rows drops and reloads dataset states and still ends as the fold', async () => {
    const group = randomName('pb-proj-group');
    const projector = await startProjector(env, group, { PUSHBASE_PROJECTOR_MAX_ROWS: '50' });
    try {
      await fc.assert(
        fc.asyncProperty(streamArb, async (steps) => {
          const account = newAccount();
          const events = streamFor(steps, account);
          const positions = await produce(env.appender, events);
          await untilCommitted(env.admin, group, env.topic, endsOf(positions));
          await expectProjectionEqualsFold(env.readModel, events, account, DATASETS);
        }),
        { numRuns: 3, endOnFailure: true },
      );
      // More loads than the datasets ever seen: states were dropped and read back from ClickHouse.
      expect(projector.projector.stats().loads).toBeGreaterThan(3 * DATASETS.length);
      expect(projector.projector.stats().evictions).toBeGreaterThan(0);
      expect(projector.projector.stats().cachedRows).toBeLessThanOrEqual(50 + 5000);
    } finally {
      await projector.stop();
    }
  });
});
