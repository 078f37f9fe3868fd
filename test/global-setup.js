// One temporary parent directory per jest run for every test server's data; removed by the teardown,
// so runs leave nothing behind in the system temp directory.
const { mkdtempSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');

module.exports = async () => {
  process.env.PUSHBASE_TEST_TMP = mkdtempSync(path.join(os.tmpdir(), 'pushbase-tests-'));
};
