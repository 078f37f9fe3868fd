import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import * as path from 'node:path';
import { legacyKafkaConfig, readServicesConfig, type ServicesConfig } from '../../deploy/local/config';
import { down, status, up } from '../../deploy/local/local-servers';
import { freePort } from '../../deploy/local/ports';
import { defaultKafkaJarsDir, startPrivateServers } from '../../deploy/local/private-servers';
import { clickhouseAnswers, kafkaAnswers, redisAnswers } from '../../deploy/local/probes';

/*
 * The services script on this machine: a fresh folder on free ports gets its own Kafka, ClickHouse and
 * Redis, `up` is idempotent, `down` stops exactly what `up` started, and a server it did not start, or a
 * recorded pid that is no longer its server, is never touched.
 */

const ROOT = path.resolve(__dirname, '../..');
const quiet = (): void => undefined;

describe('local servers (deploy/local)', () => {
  let dir: string;
  let config: ServicesConfig | undefined;
  beforeEach(() => {
    dir = mkdtempSync(path.join(process.env.PUSHBASE_TEST_TMP ?? os.tmpdir(), 'services-'));
    config = undefined;
  });
  afterEach(async () => {
    // Whatever a failed test left running in its own folder, by recorded pid.
    if (config) await down(config, quiet);
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts all three in a fresh folder, does nothing the second time, and stops exactly them', async () => {
    const [kafka, clickhouse, redis] = [await freePort(2), await freePort(3), await freePort()];
    const c = readServicesConfig(
      {
        PUSHBASE_SERVICES_DIR: dir,
        PUSHBASE_KAFKA_JARS_DIR: defaultKafkaJarsDir(process.env, ROOT),
        PUSHBASE_KAFKA_VERSION: process.env.PUSHBASE_KAFKA_VERSION,
        PUSHBASE_KAFKA_BROKERS: `127.0.0.1:${kafka}`,
        PUSHBASE_CLICKHOUSE_URL: `http://127.0.0.1:${clickhouse}`,
        PUSHBASE_REDIS_URL: `redis://127.0.0.1:${redis}`,
      },
      ROOT,
    );
    config = c;
    expect((await up(c, quiet)).sort()).toEqual(['clickhouse', 'kafka', 'redis']);
    const running = await status(c);
    expect(running.map((s) => [s.name, s.answering, typeof s.pid])).toEqual([
      ['kafka', true, 'number'],
      ['clickhouse', true, 'number'],
      ['redis', true, 'number'],
    ]);

    // ClickHouse runs 10 below the others' CPU priority: its main thread (the one the others inherit from)
    // 10 below this process's (jest may run niced), and, where the kernel has them, its session's
    // scheduling group at 10 where every new session's starts at 0.
    const niceness = (pid: number): number => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')[16]);
    const base = os.getPriority();
    const lowered = Math.min(19, base + 10);
    const pids = Object.fromEntries(running.map((s) => [s.name, s.pid!]));
    expect([niceness(pids.kafka!), niceness(pids.clickhouse!), niceness(pids.redis!)]).toEqual([base, lowered, base]);
    const autogroups = '/proc/sys/kernel/sched_autogroup_enabled';
    if (existsSync(autogroups) && readFileSync(autogroups, 'utf8').trim() === '1') {
      expect(readFileSync(`/proc/${pids.clickhouse}/autogroup`, 'utf8')).toMatch(/ nice 10\n$/);
      expect(readFileSync(`/proc/${pids.kafka}/autogroup`, 'utf8')).toMatch(/ nice 0\n$/);
    }

    await expect(up(c, quiet)).resolves.toEqual([]);
    expect((await status(c)).map((s) => s.pid)).toEqual(running.map((s) => s.pid));

    expect((await down(c, quiet)).sort()).toEqual(['clickhouse', 'kafka', 'redis']);
    await expect(kafkaAnswers(c.kafka)).resolves.toBe(false);
    await expect(clickhouseAnswers(c.clickhouse)).resolves.toBe(false);
    await expect(redisAnswers(c.redis)).resolves.toBe(false);
    for (const pid of running.map((s) => s.pid!)) expect(() => process.kill(pid, 0)).toThrow();
    await expect(down(c, quiet)).resolves.toEqual([]);
  }, 240_000);

  it('leaves alone a server that already answers: no pid recorded, and down does not stop it', async () => {
    // The Redis this test run uses answers already (jest's global setup saw to it).
    const c = readServicesConfig({ PUSHBASE_SERVICES_DIR: dir, PUSHBASE_REDIS_URL: process.env.PUSHBASE_REDIS_URL }, ROOT);
    config = c;
    await expect(up(c, quiet, ['redis'])).resolves.toEqual([]);
    expect((await status(c)).find((s) => s.name === 'redis')).toMatchObject({ answering: true, pid: undefined });
    await expect(down(c, quiet, ['redis'])).resolves.toEqual([]);
    await expect(redisAnswers(c.redis)).resolves.toBe(true);
  });

  it('is not held up by a lock a killed run left behind, with or without its pid', async () => {
    const c = readServicesConfig({ PUSHBASE_SERVICES_DIR: dir, PUSHBASE_REDIS_URL: process.env.PUSHBASE_REDIS_URL }, ROOT);
    config = c;
    // An older script killed between making the lock and writing its pid left it empty; a killed run, a dead pid.
    for (const pid of [undefined, '2147483646']) {
      mkdirSync(path.join(dir, 'lock'), { recursive: true });
      if (pid !== undefined) writeFileSync(path.join(dir, 'lock', 'pid'), pid);
      const started = Date.now();
      await expect(up(c, quiet, ['redis'])).resolves.toEqual([]);
      expect(Date.now() - started).toBeLessThan(10_000);
    }
  });

  it('stops the int-kafka-3.9 broker a killed test run left in its folder on `services:down`', async () => {
    const env = { PUSHBASE_SERVICES_DIR: dir, PUSHBASE_KAFKA_LEGACY_BROKERS: `127.0.0.1:${await freePort(2)}`, PUSHBASE_REDIS_URL: process.env.PUSHBASE_REDIS_URL };
    const legacy = legacyKafkaConfig(readServicesConfig(env, ROOT));
    config = legacy;
    // This run's 3.9 jars when it has them (Maven copies them otherwise: slower, same result).
    const jars = legacyKafkaConfig(readServicesConfig(process.env, ROOT)).kafkaJarsDir;
    if (jars !== undefined && legacy.kafkaJarsDir !== undefined && existsSync(jars)) symlinkSync(jars, legacy.kafkaJarsDir);
    expect(await up(legacy, quiet, ['kafka'])).toEqual(['kafka']);
    const pid = (await status(legacy)).find((s) => s.name === 'kafka')?.pid;
    expect(typeof pid).toBe('number');
    const out = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, ['--import', 'tsx', path.join(ROOT, 'deploy', 'local', 'cli.ts'), 'down'], { cwd: ROOT, env: { ...process.env, ...env } }, (err, stdout, stderr) =>
        err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(`${stdout}${stderr}`),
      ),
    );
    expect(out).toContain('stopped legacy kafka');
    expect(() => process.kill(pid as number, 0)).toThrow();
    await expect(kafkaAnswers(legacy.kafka)).resolves.toBe(false);
  });

  it('never signals a recorded pid that is no longer its server', async () => {
    const c = readServicesConfig({ PUSHBASE_SERVICES_DIR: dir, PUSHBASE_REDIS_URL: `redis://127.0.0.1:${await freePort()}` }, ROOT);
    config = c;
    // A process of ours that is not Redis, under the pid Redis would have recorded (a reused pid).
    const stranger = spawn('sleep', ['60'], { stdio: 'ignore' });
    try {
      mkdirSync(path.join(dir, 'redis'), { recursive: true });
      writeFileSync(path.join(dir, 'redis', 'pid'), `${stranger.pid}\n`);
      await expect(down(c, quiet, ['redis'])).resolves.toEqual([]);
      expect(stranger.exitCode).toBeNull();
      expect(() => process.kill(stranger.pid!, 0)).not.toThrow();
    } finally {
      stranger.kill('SIGKILL');
    }
  });

  it('a private set stops one server by its pid (SIGKILL) and starts it again, leaving the others alone; close removes it', async () => {
    const set = await startPrivateServers({ parentDir: dir, kafkaJarsDir: defaultKafkaJarsDir(process.env, ROOT) });
    let closed = false;
    try {
      for (const url of Object.values(set.urls)) expect(url).not.toMatch(/:(9092|8123|6379)$/);
      const before = { kafka: await set.pid('kafka'), clickhouse: await set.pid('clickhouse'), redis: await set.pid('redis') };
      await set.stop('redis', 'SIGKILL');
      expect(() => process.kill(before.redis!, 0)).toThrow();
      await expect(set.pid('redis')).resolves.toBeUndefined();
      await expect(redisAnswers(set.config.redis)).resolves.toBe(false);
      await expect(clickhouseAnswers(set.config.clickhouse)).resolves.toBe(true);
      await expect(set.stop('redis')).rejects.toThrow(/not running/);

      await set.start('redis');
      await expect(redisAnswers(set.config.redis)).resolves.toBe(true);
      const after = await set.pid('redis');
      expect(after).toEqual(expect.any(Number));
      expect(after).not.toBe(before.redis);
      expect(await set.pid('kafka')).toBe(before.kafka);
      expect(await set.pid('clickhouse')).toBe(before.clickhouse);

      await set.close();
      closed = true;
      for (const pid of [before.kafka!, before.clickhouse!, after!]) expect(() => process.kill(pid, 0)).toThrow();
      expect(existsSync(set.config.dir)).toBe(false);
    } finally {
      if (!closed) await set.close();
    }
  }, 300_000);
});
