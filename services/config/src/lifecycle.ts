/*
 * The shutdown stack every service's composition root keeps: what it opened, closed last-opened first, on a
 * failed start and on stop alike. Written here rather than taken from a package: the close-on-signal
 * libraries own the signal handling too, which the CLI already does (services/cli/src/main.ts).
 */

/**
 * Closes one thing the start opened; may return a promise. `atOnce` after a failed start: nothing is in
 * flight, so no drain or final write is owed.
 */
export type Closer = (atOnce: boolean) => unknown;

export class Lifecycle {
  private readonly closers: { readonly what: string; readonly close: Closer }[] = [];
  private closing: Promise<void> | undefined;

  /** `close` runs before everything deferred earlier. */
  defer(what: string, close: Closer): void {
    if (this.closing !== undefined) throw new Error(`${what} was opened after the shutdown began`);
    this.closers.push({ what, close });
  }

  /** Runs the rest of a start; when it throws, closes what was deferred so far and rethrows its error. */
  async start<T>(rest: () => Promise<T>): Promise<T> {
    try {
      return await rest();
    } catch (e) {
      await this.close(true).catch(() => undefined);
      throw e;
    }
  }

  /**
   * Every closer, the last deferred first, each even when one before it failed (a pool that fails to close
   * must not keep Kafka open); then rejects with the failure, if any. Once: a second call gets the first's
   * promise.
   */
  close(atOnce = false): Promise<void> {
    this.closing ??= (async () => {
      const failures: { what: string; error: unknown }[] = [];
      for (const { what, close } of [...this.closers].reverse()) {
        try {
          await close(atOnce);
        } catch (error) {
          failures.push({ what, error });
        }
      }
      const [first, ...more] = failures;
      if (first === undefined) return;
      if (more.length === 0) throw first.error;
      const message = failures.map(({ what, error }) => `${what}: ${error instanceof Error ? error.message : String(error)}`).join('; ');
      throw new AggregateError(
        failures.map((f) => f.error),
        `${failures.length} closes failed: ${message}`,
      );
    })();
    return this.closing;
  }
}
