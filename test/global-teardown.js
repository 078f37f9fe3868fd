const { rmSync } = require('node:fs');

module.exports = async () => {
  const dir = process.env.PUSHBASE_TEST_TMP;
  if (dir) rmSync(dir, { recursive: true, force: true });
};
