import { type Dirent, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { codeLines, runsForeignOnce } from './docs-npx.js';

// `npx once` in a project without @once/cli fetches and runs the unrelated registry package named
// `once`; afterwards npm's cache holds that package. So no code block in the docs runs `npx once`
// (or `npm exec once`) unless the line says `--no-install` or `-p @once/cli`.
const root = fileURLToPath(new URL('../../', import.meta.url));

function walk(dir: string): string[] {
  let entries: Dirent[];
  try {
    entries = readdirSync(join(root, dir), { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((e) => {
    if (e.name === 'node_modules' || e.name.startsWith('.')) return [];
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return walk(path);
    return e.isFile() && e.name.endsWith('.md') ? [path] : [];
  });
}

/** README.md, packages/<name>/README.md, docs/**\/*.md and examples/**\/*.md. */
function markdownFiles(): string[] {
  const packages = readdirSync(join(root, 'packages'), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => `packages/${e.name}/README.md`)
    .filter((f) => {
      try {
        readFileSync(join(root, f));
        return true;
      } catch {
        return false;
      }
    });
  return ['README.md', ...packages, ...walk('docs'), ...walk('examples')].sort();
}

describe('runsForeignOnce', () => {
  it.each([
    ['npx once migrate', true],
    ['DATABASE_URL=postgres://… npx once migrate', true],
    ['npx -y once status', true],
    ['npm exec once migrate', true],
    ['npm exec -- once migrate', true],
    ['npx --no-install once migrate', false],
    ['npx -p @once/cli once migrate', false],
    ['npx --package=@once/cli once migrate', false],
    ['npx -p @once/cli@0.9 once status', false],
    ['await migrate(pool); // or `npx --no-install once migrate`', false],
    ['npx vitest run once.test.ts', false],
    ['npx tsc -p .', false],
  ])('%s → %s', (line, expected) => {
    expect(runsForeignOnce(line)).toBe(expected);
  });
});

it('no code block in the docs runs a bare `npx once`', () => {
  const files = markdownFiles();
  expect(files).toContain('docs/nats.md');
  expect(files).toContain('packages/cli/README.md');
  const bad: string[] = [];
  let scanned = 0;
  for (const file of files) {
    for (const { line, text } of codeLines(readFileSync(join(root, file), 'utf8'))) {
      scanned++;
      if (runsForeignOnce(text)) bad.push(`${file}:${line}: ${text.trim()}`);
    }
  }
  expect(scanned).toBeGreaterThan(100);
  expect(bad.join('\n')).toBe('');
});
