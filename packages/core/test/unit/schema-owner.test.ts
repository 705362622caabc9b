import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The schema belongs to core: the CLI and the metrics read and change it through
// `@once/core/admin`, never with SQL of their own, so a migration can change a table without a
// second copy of its statements going stale in another package.

const packages = fileURLToPath(new URL('../../../', import.meta.url));

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name));
}

describe('no SQL outside core', () => {
  for (const pkg of ['cli', 'otel']) {
    it(`packages/${pkg}/src never calls .query(`, () => {
      const files = tsFiles(join(packages, pkg, 'src'));
      expect(files.length).toBeGreaterThan(3);
      const offenders = files.filter((f) => readFileSync(f, 'utf8').includes('.query('));
      expect(offenders).toEqual([]);
    });
  }

  it("the relay runs only statements from core's SQL modules (no BEGIN or LISTEN of its own)", () => {
    const relay = readFileSync(join(packages, 'core', 'src', 'outbox', 'relay.ts'), 'utf8');
    // Every query's text is a property of the outbox's statements, never a literal.
    expect(relay.match(/\.query(<[^>]*>)?\(\s*['"`]/g) ?? []).toEqual([]);
    expect(relay).not.toMatch(/['"`]\s*(BEGIN|COMMIT|ROLLBACK|LISTEN|UNLISTEN)\b/);
  });
});
