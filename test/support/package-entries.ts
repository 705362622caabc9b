import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** One public entry point: `label` names it in the report (`@once/core/admin`), `file` is its source. */
export interface Entry {
  /** The package name and subpath a user imports, as the report prints it. */
  label: string;
  /** The absolute path of the entry's source `.ts` file. */
  file: string;
}

/**
 * Every entry point of every package under `root/packages`, read from the `exports` maps: each
 * `./dist/x.d.ts` maps to its source `src/x.ts`. vitest.config.ts aliases the packages to these
 * sources, and the TSDoc guard reads its comments there; a `types` target outside `./dist/` is an
 * error, so a new subpath cannot silently load a stale build.
 */
export function packageEntries(root: string): Entry[] {
  const dir = join(root, 'packages');
  return readdirSync(dir)
    .filter((name) => existsSync(join(dir, name, 'package.json')))
    .sort()
    .flatMap((name) => {
      const pkg = JSON.parse(readFileSync(join(dir, name, 'package.json'), 'utf8')) as {
        name: string;
        exports?: Record<string, { types?: string }>;
      };
      return Object.entries(pkg.exports ?? {}).map(([subpath, target]) => {
        const types = target.types;
        if (!types?.startsWith('./dist/') || !types.endsWith('.d.ts')) {
          throw new Error(`${pkg.name}: exports["${subpath}"].types is not under ./dist/: ${types}`);
        }
        const source = `src/${types.slice('./dist/'.length, -'.d.ts'.length)}.ts`;
        return {
          label: subpath === '.' ? pkg.name : `${pkg.name}/${subpath.slice(2)}`,
          file: join(dir, name, source),
        };
      });
    });
}
