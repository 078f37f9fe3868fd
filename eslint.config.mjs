// Type-aware lint with zero warnings. The domain folder is fenced: no I/O, no clock, no randomness.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', '**/dist/**', 'coverage/**', '.data/**', '.services/**', 'bin/**', 'bench/.scratch*'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
    },
  },
  {
    // Plain CommonJS scripts (jest config and hooks, the install helper): linted, but without types.
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'commonjs',
      globals: { require: 'readonly', module: 'writable', process: 'readonly', __dirname: 'readonly', __filename: 'readonly', console: 'readonly', globalThis: 'readonly' },
    },
    rules: { ...tseslint.configs.disableTypeChecked.rules, '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['eslint.config.mjs'],
    languageOptions: { sourceType: 'module' },
  },
  {
    files: ['**/*.test.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Response bodies in tests are whatever the server sent; the assertions are the type check.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
    },
  },
  {
    // A package is used through its index: a deep import reaches past what it exports (and hid a cycle).
    files: ['services/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'deploy/**/*.ts'],
    ignores: ['services/domain/src/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ group: ['@pushbase/*/src', '@pushbase/*/src/*'], message: 'Import the package (@pushbase/<name>), not its files.' }] }],
    },
  },
  {
    // The purity fence: the fold and the validation rules must give the same answer everywhere they run
    // (embedded projection, ClickHouse projector, replay, tests), so they may not touch I/O, time or chance.
    files: ['services/domain/src/**/*.ts'],
    ignores: ['services/domain/src/**/*.test.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { group: ['node:*', 'fs', 'fs/*', 'net', 'http', 'https', 'crypto', 'os', 'child_process', 'worker_threads', 'path'], message: 'The domain does no I/O.' },
          { group: ['kafkajs', '@grpc/*', '@clickhouse/*', 'koa', '@koa/*', 'ioredis', '@pushbase/*'], message: 'The domain imports no adapter and no other service.' },
        ],
      }],
      'no-restricted-globals': ['error',
        { name: 'Date', message: 'Time is an input to the domain, never read from the clock.' },
        { name: 'process', message: 'The domain reads no environment.' },
        { name: 'setTimeout', message: 'The domain does not schedule.' },
        { name: 'setInterval', message: 'The domain does not schedule.' },
        { name: 'fetch', message: 'The domain does no I/O.' },
        { name: 'require', message: 'The domain does no dynamic loading.' },
      ],
      'no-restricted-properties': ['error',
        { object: 'Math', property: 'random', message: 'The domain is deterministic.' },
        { object: 'crypto', property: 'randomUUID', message: 'The domain is deterministic.' },
        { object: 'performance', property: 'now', message: 'Time is an input to the domain.' },
      ],
    },
  },
);
