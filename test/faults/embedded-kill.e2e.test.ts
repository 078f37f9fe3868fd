import { randomBytes } from 'node:crypto';
import { FaultWorkload } from '../helpers/fault-workload';
import { TestServer } from '../helpers/server';

/*
 * The fault workload and its oracle against the embedded server (`pushbase serve`): kill -9 of the whole
 * server under load, twice, restarting it on the same data directory each time. Afterwards what the admin
 * listener shows must be the pure fold of the acknowledged requests: nothing acknowledged lost, nothing
 * refused applied, nothing applied twice; and the keyed datasets' requests, sent again with their
 * Idempotency-Keys after the kills cut them, applied exactly once. The same workload drives the distributed
 * fault tests.
 */

describe('embedded server: kill -9 under load', () => {
  const keys = Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`fault-${i}-${randomBytes(3).toString('hex')}`, `key-${randomBytes(12).toString('hex')}`]));
  const server = new TestServer({ keys, env: { PUSHBASE_RATE_LIMIT_PER_MINUTE: '1000000', PUSHBASE_WRITE_WORKERS: '1' } });
  let workload: FaultWorkload | undefined;

  afterAll(async () => {
    await workload?.stop();
    await server.stop();
  });

  it('shows exactly the fold of the acknowledged requests after two kills', async () => {
    await server.start();
    workload = new FaultWorkload({ target: server, keys, datasetsPerAccount: 5 });
    workload.start();
    let acknowledged = (await workload.waitFor((t) => t.acknowledged >= 150, 60_000, '150 acknowledged requests')).acknowledged;
    for (let round = 0; round < 2; round++) {
      await server.kill9();
      // While it is down, requests find no listener: they were never sent.
      const down = workload.tally().requests;
      await workload.waitFor((t) => t.requests >= down + 20, 30_000, 'requests while the server is down');
      await server.start();
      acknowledged = (await workload.waitFor((t) => t.acknowledged >= acknowledged + 150, 90_000, '150 more acknowledged requests after the restart')).acknowledged;
    }
    await workload.stop();
    const tally = workload.tally();
    const result = await workload.verify(30_000);
    // The kills hit requests in flight; the rest were answered.
    expect(tally.acknowledged).toBeGreaterThanOrEqual(450);
    expect(result.datasets).toBe(20);
    expect(result.records).toBeGreaterThan(0);
    // The kills cut keyed requests, sent again with their keys; none was taken for another request.
    expect(tally.retried).toBeGreaterThan(0);
    expect(tally.keyMismatches).toBe(0);
    process.stderr.write(`keyed requests sent again: ${tally.retried} (${tally.retries} attempts more); unknown outcomes left: ${tally.unknown}\n`);
  }, 300_000);
});
