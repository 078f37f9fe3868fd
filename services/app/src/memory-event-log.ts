import type { EventListener, EventLog } from '@pushbase/contracts';
import { DomainError, type DatasetEvent } from '@pushbase/domain';

/** An event log that keeps events in memory: the reference adapter for the EventLog contract suite. */
export class MemoryEventLog implements EventLog {
  readonly events: DatasetEvent[] = [];
  private listener: EventListener | undefined;
  private closed = false;

  start(listener: EventListener): Promise<void> {
    this.listener = listener;
    if (this.events.length > 0) listener(this.events.slice());
    return Promise.resolve();
  }

  append(events: readonly DatasetEvent[], _encoded?: Uint8Array): Promise<void> {
    if (this.closed) return Promise.reject(new DomainError('unavailable', 'The event log is closed'));
    this.events.push(...events);
    this.listener?.(events);
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }
}
