#!/usr/bin/env node
import { Command } from 'commander';
import { jsonLogger, loadConfig, startEmbedded } from '@pushbase/embedded';

/** `pushbase serve`: every service in one process, on the embedded default. */
async function serve(): Promise<void> {
  const running = await startEmbedded(loadConfig());
  let signalled = false;
  const shutdown = (signal: string): void => {
    if (signalled) return;
    signalled = true;
    jsonLogger('shutting down', { signal });
    running.stop().then(
      () => process.exit(0),
      (e: unknown) => {
        jsonLogger('shutdown failed', { error: e instanceof Error ? e.message : String(e) });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

const program = new Command('pushbase').description('Self-hostable dataset-push service speaking the Geckoboard datasets API');
program
  .command('serve', { isDefault: true })
  .description('run every service in one process (event log in PUSHBASE_DATA_DIR, HTTPS on PUSHBASE_PORT)')
  .action(serve);

program.parseAsync(process.argv).catch((e: unknown) => {
  process.stderr.write(`pushbase: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
