import type { Admin } from 'kafkajs';
import { KafkaJSProtocolError } from 'kafkajs';
import { fetchGroupOffsets } from '../src/group-offsets';

// The coordinator's refusals as kafkajs raises them (createErrorFromCode): 16 NOT_COORDINATOR, 14
// COORDINATOR_LOAD_IN_PROGRESS are retriable; 30 GROUP_AUTHORIZATION_FAILED is not.
const CODES: Record<string, number> = { NOT_COORDINATOR: 16, COORDINATOR_LOAD_IN_PROGRESS: 14, GROUP_AUTHORIZATION_FAILED: 30 };
// At run time the constructor takes kafkajs's error spec (its types name only Error | string).
const refusal = (type: string, retriable: boolean): Error => new KafkaJSProtocolError({ type, code: CODES[type], retriable, message: type } as unknown as Error);

function adminAnswering(...answers: (Error | { partition: number; offset: string }[])[]): { admin: Admin; calls: () => number } {
  let calls = 0;
  const admin = {
    fetchOffsets: () => {
      const next = answers[Math.min(calls++, answers.length - 1)]!;
      return next instanceof Error ? Promise.reject(next) : Promise.resolve([{ topic: 't', partitions: next.map((p) => ({ ...p, metadata: null })) }]);
    },
  } as unknown as Admin;
  return { admin, calls: () => calls };
}

describe('fetchGroupOffsets', () => {
  it('tries the coordinator again while it refuses with a retriable error, then answers per partition', async () => {
    const { admin, calls } = adminAnswering(refusal('NOT_COORDINATOR', true), refusal('COORDINATOR_LOAD_IN_PROGRESS', true), [
      { partition: 0, offset: '12' },
      { partition: 1, offset: '-1' },
    ]);
    expect(await fetchGroupOffsets(admin, 'g', 't')).toEqual(new Map([[0, 12], [1, -1]]));
    expect(calls()).toBe(3);
  });

  it('gives up at once on an error that is not retriable, and after a bounded number of tries on one that is', async () => {
    const denied = adminAnswering(refusal('GROUP_AUTHORIZATION_FAILED', false));
    await expect(fetchGroupOffsets(denied.admin, 'g', 't')).rejects.toThrow('GROUP_AUTHORIZATION_FAILED');
    expect(denied.calls()).toBe(1);
    const moving = adminAnswering(refusal('NOT_COORDINATOR', true));
    await expect(fetchGroupOffsets(moving.admin, 'g', 't')).rejects.toThrow('NOT_COORDINATOR');
    expect(moving.calls()).toBe(8);
  }, 30_000);
});
