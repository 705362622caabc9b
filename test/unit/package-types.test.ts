import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

// TypeScript with `module: commonjs` (moduleResolution node10) reads no `exports`: it finds a
// package's declarations through top-level `types`, and a subpath's through `typesVersions`.
// Each must name the same file as the `exports` entry's `types` (scripts/peers-check/modules
// type-checks against the packed packages).
const root = fileURLToPath(new URL('../../', import.meta.url));

it('every package’s top-level types and typesVersions match its exports', () => {
  const seen: string[] = [];
  for (const name of readdirSync(join(root, 'packages'))) {
    const pkg = JSON.parse(readFileSync(join(root, 'packages', name, 'package.json'), 'utf8'));
    if (pkg.private) continue;
    const exp = pkg.exports as Record<string, { types: string }>;
    expect(pkg.types, `${pkg.name}: types`).toBe(exp['.']?.types);
    const subpaths = Object.keys(exp).filter((k) => k !== '.');
    const expected = Object.fromEntries(subpaths.map((k) => [k.slice(2), [exp[k]!.types]]));
    expect(pkg.typesVersions?.['*'] ?? {}, `${pkg.name}: typesVersions`).toEqual(expected);
    seen.push(...subpaths.map((k) => `${pkg.name}/${k.slice(2)}`));
  }
  expect(seen).toContain('@once/core/admin');
  expect(seen).toContain('@once/http/fetch');
});
