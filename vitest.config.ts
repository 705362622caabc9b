import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Tests import the packages by name; resolve them to their sources so a test run never
// depends on a stale dist/ (programs started as child processes use the built dist/). The
// aliases come from every package's `exports` map (`./dist/x/index.d.ts` → `src/x/index.ts`), so
// a new subpath cannot silently load dist/.
const packagesDir = fileURLToPath(new URL('./packages/', import.meta.url));
const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
const alias = readdirSync(packagesDir)
  .filter((dir) => existsSync(`${packagesDir}${dir}/package.json`))
  .flatMap((dir) => {
    const pkg = JSON.parse(readFileSync(`${packagesDir}${dir}/package.json`, 'utf8')) as {
      name: string;
      exports?: Record<string, { types?: string }>;
    };
    return Object.entries(pkg.exports ?? {}).map(([subpath, target]) => {
      const types = target.types;
      if (!types?.startsWith('./dist/') || !types.endsWith('.d.ts')) {
        throw new Error(`${pkg.name}: exports["${subpath}"].types is not under ./dist/: ${types}`);
      }
      const specifier = subpath === '.' ? pkg.name : `${pkg.name}/${subpath.slice(2)}`;
      return {
        find: new RegExp(`^${escapeRegExp(specifier)}$`),
        replacement: `${packagesDir}${dir}/src/${types.slice('./dist/'.length, -'.d.ts'.length)}.ts`,
      };
    });
  });

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
    ],
  },
});
