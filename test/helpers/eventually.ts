export interface EventuallyOptions {
  /** How long to keep trying; 20 s by default. */
  readonly timeoutMs?: number;
  /** What is awaited, for the failure message. */
  readonly what?: string;
}

/**
 * Polls `check` every 50 ms until it returns something other than false or undefined, and returns that;
 * fails once `timeoutMs` has passed. A check that throws fails at once.
 */
export async function eventually<T>(check: () => T | Promise<T>, opts: EventuallyOptions = {}): Promise<Exclude<T, false | undefined>> {
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== false && v !== undefined) return v as Exclude<T, false | undefined>;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${opts.what ?? 'the condition'}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
