/**
 * How deploy/local/cli.ts and deploy/cluster/cli.ts run: `main` gets the arguments and a `say` that
 * prints a line under the command's name, and returns the exit code; an error is printed the same way
 * and exits 1. Resolves once the exit code is set.
 */
export function runCommand(name: string, main: (argv: readonly string[], say: (line: string) => void) => Promise<number>, argv: readonly string[] = process.argv.slice(2)): Promise<void> {
  const say = (line: string): void => {
    process.stdout.write(`${name}: ${line}\n`);
  };
  return main(argv, say).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`${name}: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
