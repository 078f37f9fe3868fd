/*
 * A projector in a process of its own, for the crash test: the real runProjector, configured from the
 * environment like `pushbase projector`. With PUSHBASE_TEST_KILL_AFTER_WRITE=n it kills itself with
 * SIGKILL right after its n-th write landed in ClickHouse and before that write's offsets are committed:
 * the worst moment for idempotence.
 */
import { loadProjectorConfig, runProjector } from '../src';

const killAfter = Number(process.env.PUSHBASE_TEST_KILL_AFTER_WRITE ?? '0');

async function main(): Promise<void> {
  const running = await runProjector(loadProjectorConfig(), {
    afterWrite: (n) => {
      if (n === killAfter) {
        process.stdout.write(`${JSON.stringify({ msg: 'killing myself after write', write: n })}\n`);
        process.kill(process.pid, 'SIGKILL');
      }
    },
    onFatal: () => process.exit(3),
  });
  process.on('SIGTERM', () => void running.stop().then(() => process.exit(0)));
}

main().catch((e: unknown) => {
  process.stderr.write(`projector child: ${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(2);
});
