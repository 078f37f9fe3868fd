// One temporary parent directory per jest run for every test server's data; removed by the teardown,
// so runs leave nothing behind in the system temp directory.
const { mkdtempSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');

// It also builds dist/pushbase.js, so end-to-end tests always run the code as it is now, as shipped.
const { execFileSync } = require('node:child_process');

module.exports = async () => {
  execFileSync(process.execPath, [path.join(__dirname, '..', 'scripts', 'build.js')], { stdio: 'inherit' });
  process.env.PUSHBASE_TEST_TMP = mkdtempSync(path.join(os.tmpdir(), 'pushbase-tests-'));
};
