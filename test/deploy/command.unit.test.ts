import { runCommand } from '../../deploy/command';

/* deploy's commands (services, cluster): lines under the command's name, its result the exit code. */

let out: string[];
let err: string[];
beforeEach(() => {
  out = [];
  err = [];
  jest.spyOn(process.stdout, 'write').mockImplementation((chunk) => out.push(String(chunk)) > 0);
  jest.spyOn(process.stderr, 'write').mockImplementation((chunk) => err.push(String(chunk)) > 0);
});
afterEach(() => {
  jest.restoreAllMocks();
  process.exitCode = undefined;
});

test('main gets the arguments and a say under the command name; what it returns is the exit code', async () => {
  await runCommand(
    'services',
    (argv, say) => {
      say(`asked to ${argv.join(' ')}`);
      return Promise.resolve(3);
    },
    ['up', 'kafka'],
  );
  expect(out).toEqual(['services: asked to up kafka\n']);
  expect(err).toEqual([]);
  expect(process.exitCode).toBe(3);
});

test('an error is one line under the command name, and exit code 1', async () => {
  await runCommand(
    'cluster',
    () => Promise.reject(new Error('the cluster is not up')),
    [],
  );
  expect(out).toEqual([]);
  expect(err).toEqual(['cluster: the cluster is not up\n']);
  expect(process.exitCode).toBe(1);
});
