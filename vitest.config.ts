import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Tests import the packages by name; resolve them to their sources so a test run never
// depends on a stale dist/ (programs started as child processes use the built dist/).
const src = (pkg: string) => fileURLToPath(new URL(`./packages/${pkg}/src/`, import.meta.url));
const alias = [
  { find: /^@once\/core\/testing$/, replacement: `${src('core')}testing/index.ts` },
  { find: /^@once\/core\/adapter$/, replacement: `${src('core')}adapter/index.ts` },
  { find: /^@once\/core\/admin$/, replacement: `${src('core')}admin/index.ts` },
  {
    find: /^@once\/(core|kafka|sqs|rabbitmq|cli)$/,
    replacement: `${fileURLToPath(new URL('./packages/', import.meta.url))}$1/src/index.ts`,
  },
];

export default defineConfig({
  resolve: { alias },
  test: {
    reporters: ['default', ['json', { outputFile: '.cache/vitest-report.json' }]],
    projects: [
      {
        resolve: { alias },
        test: {
          name: 'unit',
          // Projects with different worker settings need their own group: units first.
          sequence: { groupOrder: 0 },
          include: ['packages/*/test/unit/**/*.test.ts', 'test/unit/**/*.test.ts'],
        },
      },
      {
        resolve: { alias },
        test: {
          name: 'integration',
          sequence: { groupOrder: 1 },
          include: ['packages/*/test/integration/**/*.test.ts', 'test/integration/**/*.test.ts'],
          globalSetup: ['test/support/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          fileParallelism: true,
          maxWorkers: 2,
        },
      },
    ],
  },
});
