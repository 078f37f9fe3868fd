import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { readServicesConfig } from '../../deploy/local/config';

/*
 * The services script's Kafka probe prints nothing of kafkajs's own: jest's global setup and
 * `npm run services:status` run it, and their output is for the person at the terminal.
 */

const ROOT = path.resolve(__dirname, '../..');

test("probing the test run's Kafka answers true and prints nothing", () => {
  const { kafka } = readServicesConfig(process.env, ROOT);
  // A process of its own: kafkajs's timer warning is printed once per process, so jest's could have had it.
  const script = `require(${JSON.stringify(path.join(ROOT, 'deploy/local/probes.ts'))}).kafkaAnswers(${JSON.stringify(kafka)}).then((ok) => process.stdout.write(String(ok)))`;
  const res = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
  expect({ stdout: res.stdout, stderr: res.stderr, status: res.status }).toEqual({ stdout: 'true', stderr: '', status: 0 });
});
