// Jest's own order, and a note of which projects have a test in this run, for the global setup: jest hands
// the global setup its options (without --selectProjects) but not the tests, and the sequencer sees them
// first, in the same process. So a run that holds no int-kafka-3.9 suite (selected by project or by path)
// starts no 3.9 broker, and one of unit tests alone starts no server at all.
const Sequencer = require('@jest/test-sequencer').default;

class ProjectSequencer extends Sequencer {
  sort(tests) {
    globalThis.__pushbaseTestProjects = new Set(tests.map((t) => t.context.config.displayName?.name ?? ''));
    return super.sort(tests);
  }
}

module.exports = ProjectSequencer;
