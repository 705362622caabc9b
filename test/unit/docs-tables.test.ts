import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { docFiles } from './doc-samples.js';
import { badRows, cells } from './docs-tables.js';

// A row with fewer cells than its header's columns puts every cell after the gap under the wrong
// heading (the README's per-broker table once showed NATS's text under RabbitMQ). Every table in
// the Markdown files has as many cells in each row as in its header.
const root = fileURLToPath(new URL('../../', import.meta.url));

/** Every Markdown file at the top and at any depth of docs/, packages/ and examples/. */
const walk = (): string[] => docFiles(root, { top: true, tree: ['docs', 'packages', 'examples'] });

describe('cells', () => {
  it.each([
    ['| a | b |', ['a', 'b']],
    ['a | b', ['a', 'b']],
    ['| `x | y` | b |', ['`x | y`', 'b']],
    ['| a \\| b | c |', ['a \\| b', 'c']],
    ['| `` a ` | `` | b |', ['`` a ` | ``', 'b']],
    ['| | b |', ['', 'b']],
  ])('%s', (row, expected) => {
    expect(cells(row)).toEqual(expected);
  });
});

it('finds a row short of its header', () => {
  const md = [
    '| | a | b | c |',
    '|---|---|---|---|',
    '| x | 1 | 2 | 3 |',
    '| y | 1 | 2 |',
    '',
    '```',
    '| no | table |',
    '|---|',
    '```',
  ].join('\n');
  expect(badRows(md)).toEqual([{ line: 4, expected: 4, found: 3 }]);
});

it('every Markdown table has as many cells in each row as its header', () => {
  const files = walk();
  expect(files).toContain('README.md');
  expect(files).toContain('docs/core.md');
  let tables = 0;
  const bad: string[] = [];
  for (const file of files) {
    const md = readFileSync(join(root, file), 'utf8');
    tables += (md.match(/^\s*\|?\s*:?-{3,}:?\s*\|/gm) ?? []).length;
    for (const b of badRows(md)) bad.push(`${file}:${b.line}: ${b.found} cells under ${b.expected} columns`);
  }
  expect(tables).toBeGreaterThan(20);
  expect(bad.join('\n')).toBe('');
});
