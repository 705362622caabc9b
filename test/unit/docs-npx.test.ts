import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { docFiles } from './doc-samples.js';
import { codeLines, runsForeignOnce } from './docs-npx.js';

// `npx once` in a project without @once/cli fetches and runs the unrelated registry package named
// `once`; afterwards npm's cache holds that package. So no code block in the docs runs `npx once`
// (or `npm exec once`) unless the line says `--no-install` or `-p @once/cli`.
const root = fileURLToPath(new URL('../../', import.meta.url));

/** README.md, packages/<name>/README.md, docs/**\/*.md and examples/**\/*.md. */
function markdownFiles(): string[] {
  return docFiles(root, { tree: ['docs', 'examples'] });
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
