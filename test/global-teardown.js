const { rmSync } = require('node:fs');

module.exports = async () => {
  // Stops only the servers the global setup started; ones that already answered stay up.
  const services = globalThis.__pushbaseTestServices;
  if (services) await services.stop();
  const dir = process.env.PUSHBASE_TEST_TMP;
  if (dir) rmSync(dir, { recursive: true, force: true });
};
