import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { REQUEST_PATH_HEAP_GROWING_PERCENT, tuneRequestPathHeap } from '../src/heap';

describe('tuneRequestPathHeap', () => {
  it('keeps an operator’s own growing factor', () => {
    expect(tuneRequestPathHeap(['--enable-source-maps', '--heap-growing-percent=150'])).toBe('--heap-growing-percent=150');
    expect(tuneRequestPathHeap(['--heap_growing_percent=90'])).toBe('--heap_growing_percent=90');
  });

  it('sets a flag this V8 knows, in a process of its own', () => {
    // A child, so this test's heap keeps V8's defaults. V8 writes a warning on stderr for a flag it does not
    // know (a renamed flag in a later Node would otherwise be a silent no-op); its effect on the services'
    // collections is measured by bench:distributed (services/cli/src/heap.ts).
    const script = `const { tuneRequestPathHeap } = require(${JSON.stringify(path.resolve(__dirname, '../src/heap.ts'))}); console.log(tuneRequestPathHeap([]));`;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], { encoding: 'utf8' });
    expect(child.status).toBe(0);
    expect(child.stdout.trim()).toBe(`--heap-growing-percent=${REQUEST_PATH_HEAP_GROWING_PERCENT}`);
    expect(child.stderr).toBe('');
  });
});
