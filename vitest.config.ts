import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { packageEntries } from './test/support/package-entries.js';

// Tests import the packages by name; resolve them to their sources so a test run never
// depends on a stale dist/ (programs started as child processes use the built dist/). The
// aliases come from every package's `exports` map (`./dist/x/index.d.ts` → `src/x/index.ts`), so
// a new subpath cannot silently load dist/.
const root = fileURLToPath(new URL('./', import.meta.url));
const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
const alias = packageEntries(root).map((entry) => ({
  find: new RegExp(`^${escapeRegExp(entry.label)}$`),
  replacement: entry.file,
}));

/** A project of tests against the real services, which its global setup provides. */
const services = (name: string, groupOrder: number, include: string[]) => ({
  resolve: { alias },
  test: {
    name,
    sequence: { groupOrder },
    include,
    globalSetup: ['test/support/prisma-setup.ts', 'test/support/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    fileParallelism: true,
    maxWorkers: 2,
  },
});

export default defineConfig({
  resolve: { alias },
  test: {
    // VITEST_JSON_REPORT: where a second run in one CI job (scripts/containers-check) puts its own.
    reporters: [
      'default',
      ['json', { outputFile: process.env.VITEST_JSON_REPORT || '.cache/vitest-report.json' }],
    ],
    projects: [
      {
        resolve: { alias },
        test: {
          name: 'unit',
          // Projects with different worker settings need their own group: units first.
          sequence: { groupOrder: 0 },
          include: ['packages/*/test/unit/**/*.test.ts', 'test/unit/**/*.test.ts'],
          globalSetup: ['test/support/prisma-setup.ts'],
        },
      },
      services('integration', 1, [
        'packages/*/test/integration/**/*.test.ts',
        'test/integration/**/*.test.ts',
      ]),
      // The smoke tests against the services in containers (ONCE_SERVICES=testcontainers, which
      // the global setup reads), with the test that no container port is published off loopback:
      // `npm run test:containers`. Defined only in that mode, so `npm test` never needs Docker.
      ...(process.env.ONCE_SERVICES === 'testcontainers'
        ? [services('containers', 2, ['test/containers/**/*.test.ts', 'test/integration/smoke-*.test.ts'])]
        : []),
      // The @confluentinc/kafka-javascript client's own traps (ONCE_KAFKA_CLIENT=confluent, after
      // scripts/confluent-install): defined only in that mode, since a fresh clone has no addon.
      ...(process.env.ONCE_KAFKA_CLIENT === 'confluent'
        ? [services('kafka-confluent', 3, ['packages/kafka/test/confluent/**/*.test.ts'])]
        : []),
    ],
  },
});
