import { Lifecycle } from '../src';

/* The shutdown stack of every composition root: last opened, first closed, whatever fails on the way. */

describe('Lifecycle', () => {
  it('closes the last deferred first', async () => {
    const order: string[] = [];
    const life = new Lifecycle();
    for (const what of ['redis', 'kafka', 'server']) life.defer(what, () => order.push(what));
    await life.close();
    expect(order).toEqual(['server', 'kafka', 'redis']);
  });

  it('waits for each close before the next', async () => {
    const order: string[] = [];
    const life = new Lifecycle();
    life.defer('redis', () => order.push('redis'));
    life.defer('server', () => new Promise<void>((resolve) => setImmediate(() => resolve(void order.push('server drained')))));
    await life.close();
    expect(order).toEqual(['server drained', 'redis']);
  });

  it('runs every close when one fails, then rejects with that failure', async () => {
    const closed: string[] = [];
    const life = new Lifecycle();
    life.defer('redis', () => closed.push('redis'));
    life.defer('pool', () => Promise.reject(new Error('worker stuck')));
    life.defer('server', () => closed.push('server'));
    await expect(life.close()).rejects.toThrow('worker stuck');
    expect(closed).toEqual(['server', 'redis']);
  });

  it('names every failure when several fail', async () => {
    const life = new Lifecycle();
    life.defer('redis', () => {
      throw new Error('gone');
    });
    life.defer('kafka', () => Promise.reject(new Error('broker down')));
    const error = await life.close().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(AggregateError);
    expect((error as AggregateError).message).toBe('2 closes failed: kafka: broker down; redis: gone');
  });

  it('closes once, however often it is asked', async () => {
    let closes = 0;
    const life = new Lifecycle();
    life.defer('redis', () => closes++);
    await Promise.all([life.close(), life.close()]);
    await life.close();
    expect(closes).toBe(1);
  });

  it('refuses what is opened after the shutdown began', async () => {
    const life = new Lifecycle();
    await life.close();
    expect(() => life.defer('late', () => undefined)).toThrow('late was opened after the shutdown began');
  });

  it('closes what a failed start opened, and rethrows the start error, not a close error', async () => {
    const closed: string[] = [];
    const life = new Lifecycle();
    life.defer('redis', () => closed.push('redis'));
    const started = life.start(async () => {
      life.defer('kafka', () => Promise.reject(new Error('not connected')));
      await Promise.resolve();
      throw new Error('port in use');
    });
    await expect(started).rejects.toThrow('port in use');
    expect(closed).toEqual(['redis']);
  });

  it('tells closers when a failed start closes them: no drain is owed', async () => {
    const told: [string, boolean][] = [];
    const life = new Lifecycle();
    life.defer('server', (atOnce) => told.push(['server', atOnce]));
    await expect(life.start(() => Promise.reject(new Error('no broker')))).rejects.toThrow('no broker');
    const stopped = new Lifecycle();
    stopped.defer('server', (atOnce) => told.push(['stopped server', atOnce]));
    await stopped.close();
    expect(told).toEqual([
      ['server', true],
      ['stopped server', false],
    ]);
  });

  it('keeps what a successful start opened open', async () => {
    const closed: string[] = [];
    const life = new Lifecycle();
    await expect(
      life.start(() => {
        life.defer('redis', () => closed.push('redis'));
        return Promise.resolve(7);
      }),
    ).resolves.toBe(7);
    expect(closed).toEqual([]);
  });
});
