import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { checkSamples, collectSamples, extractSamples } from './doc-samples.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

describe('extractSamples', () => {
  it('finds ts and typescript blocks with the line of their first code line, and the nocheck marker', () => {
    const md = [
      '# Title', // 1
      '```ts', // 2
      'const a = 1;', // 3
      '```', // 4
      '```sh', // 5
      'npm test', // 6
      '```', // 7
      '````typescript nocheck', // 8
      'x', // 9
      '```', // 10: shorter than the opening fence, so still inside
      '````', // 11
      '```TS', // 12
      '```', // 13
    ].join('\n');
    expect(extractSamples('a.md', md)).toEqual([
      { file: 'a.md', line: 3, code: 'const a = 1;', nocheck: false },
      { file: 'a.md', line: 9, code: 'x\n```', nocheck: true },
      { file: 'a.md', line: 13, code: '', nocheck: false },
    ]);
  });
});

describe('the docs’ TypeScript samples', () => {
  it('type-check against the packages’ sources', { timeout: 120_000 }, () => {
    const samples = collectSamples(root);
    const checked = samples.filter((s) => !s.nocheck);
    // A sanity floor: an extractor that silently finds nothing would pass everything.
    expect(checked.length).toBeGreaterThan(10);
    const errors = checkSamples(root, `${root}.cache/doc-samples`, checked);
    const report = errors.map((e) => `${e.file}:${e.line}: ${e.message}`).join('\n');
    expect(report, 'fix the sample (or mark a deliberate fragment ```ts nocheck)').toBe('');
  });
});
