import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { MemoryEventLog } from '@pushbase/app';
import { FileEventLog } from '../../services/embedded/src/file-event-log';
import { describeEventLogContract } from './event-log.contract';

describeEventLogContract('MemoryEventLog', () => {
  let latest = new MemoryEventLog();
  return Promise.resolve({
    log: latest,
    // Memory has no storage; a "reopen" hands the latest instance's events to a fresh one, as a restart would.
    reopen: () => {
      const next = new MemoryEventLog();
      next.events.push(...latest.events);
      latest = next;
      return Promise.resolve(next);
    },
    cleanup: () => Promise.resolve(),
  });
});

describeEventLogContract('FileEventLog', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pushbase-event-log-'));
  // A subdirectory that does not exist yet: the log creates its directory.
  const logDir = path.join(dir, 'data');
  return {
    log: new FileEventLog({ dir: logDir }),
    reopen: () => Promise.resolve(new FileEventLog({ dir: logDir })),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});

describeEventLogContract('FileEventLog (tiny segments: a roll every frame or two)', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pushbase-event-log-seg-'));
  const logDir = path.join(dir, 'data');
  return {
    log: new FileEventLog({ dir: logDir, segmentBytes: 150 }),
    reopen: () => Promise.resolve(new FileEventLog({ dir: logDir, segmentBytes: 150 })),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});
