import { existsSync, readdirSync } from 'node:fs';
import * as path from 'node:path';

/*
 * The int-kafka-3.9 project runs its Kafka suites once more, on the 3.9.x broker; they are named in
 * jest.config.js by path, and a renamed or moved suite would drop out of it without a word. This fails then.
 */

const ROOT = path.resolve(__dirname, '../..');

describe('the int-kafka-3.9 project', () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const config = require('../../jest.config.js') as { projects: { displayName: string; testMatch: string[]; setupFiles?: string[] }[] };
  const project = config.projects.find((p) => p.displayName === 'int-kafka-3.9');

  it('names suites that exist: the Kafka adapter’s, the event-log contract and replay', () => {
    const names = (project?.testMatch ?? []).map((m) => m.replace('<rootDir>/', ''));
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) {
      if (!name.includes('*')) {
        expect({ name, exists: existsSync(path.join(ROOT, name)) }).toEqual({ name, exists: true });
        continue;
      }
      // Only a file-name pattern in one folder is used there.
      const dir = path.dirname(name);
      const pattern = new RegExp(`^${path.basename(name).replace(/\./g, '\\.').replace(/\*/g, '[^/]*')}$`);
      expect({ name, matches: readdirSync(path.join(ROOT, dir)).filter((f) => pattern.test(f)).length > 5 }).toEqual({ name, matches: true });
    }
  });

  it('points the suites at the legacy broker before they load', () => {
    expect(project?.setupFiles).toEqual(['<rootDir>/test/helpers/legacy-kafka.ts']);
  });
});
