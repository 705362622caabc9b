import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
// @ts-expect-error plain JavaScript module of the fault campaign, without declarations
import { jsonText } from '../../chaos/json-text.mjs';

// The campaign writes its summaries as the repo's formatter would (chaos/json-text.mjs), so that
// a committed result passes `npm run lint` as written.

describe('jsonText', () => {
  it('reads back as the same value, for any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(JSON.parse(jsonText(v))).toEqual(JSON.parse(JSON.stringify(v)));
      }),
      { numRuns: 500 },
    );
  });

  it('is what biome writes for a summary with short and long arrays', () => {
    const summary = {
      broker: 'sqs',
      lengthsMs: [2000, 15000, 45000],
      violations: [],
      ids: Array.from({ length: 30 }, (_, i) => `chaos-sqs-2720-mx7-m${i}`),
      nested: { byLength: { '2000': { total: 3, recoveryP99Ms: null } }, empty: {} },
      stopExits: [{ code: 0, signal: null }],
    };
    const text = `${jsonText(summary)}\n`;
    // The repo's biome, on the text as a JSON file of this repo would be formatted.
    // The binary itself, not through npx: npx costs seconds of its own on a loaded machine.
    const biome = fileURLToPath(new URL('../../node_modules/.bin/biome', import.meta.url));
    const formatted = execFileSync(biome, ['format', '--stdin-file-path=chaos/results/x.json'], {
      input: text,
      encoding: 'utf8',
      // biome notes its own configuration's deprecations on stderr.
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    expect(formatted).toBe(text);
    // A budget for the child process on a busy machine (node 24's CI run passed 5 s), not a claim on speed.
  }, 60_000);
});
