import { TestServer } from '../helpers/server';

/*
 * The data directory's lock (embedded mode only: the distributed services keep no data directory of their
 * own; their state is in Kafka, ClickHouse and Redis, which any number of processes share).
 */

describe('one server per data directory', () => {
  it('refuses to start a second server on a data directory in use, and says which process holds it', async () => {
    const first = await new TestServer().start();
    try {
      const second = new TestServer({ dataDir: first.dataDir, keys: first.keys });
      await expect(second.start()).rejects.toThrow(new RegExp(`is in use by process ${first.proc!.pid}`));
      expect((await first.request('GET', '/', { key: first.keys.acme! })).status).toBe(200);
    } finally {
      await first.stop();
    }
    // A clean stop releases it.
    const third = await new TestServer({ dataDir: first.dataDir, keys: first.keys }).start();
    await third.stop();
  });
});
