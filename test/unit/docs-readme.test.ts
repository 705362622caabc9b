import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

// The root README is for users first: it opens with what once does and an `npm install`, then the
// first consumer; what the repository's own tests need (Java, Maven, PgBouncer) comes after, under
// the contributors' heading.
const readme = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');

it('opens with npm install and the first consumer; the contributors’ prerequisites come later', () => {
  const headings = [...readme.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
  expect(headings[0]).toBe('A first consumer');
  const firstBlock = /```(\w*)\n([^\n]*)/.exec(readme);
  expect(firstBlock?.[2]).toMatch(/^npm install @once\/core /);
  const contributors = readme.indexOf('## Working on this repository');
  expect(contributors).toBeGreaterThan(readme.indexOf('## A first consumer'));
  for (const word of ['Java 17', 'Maven', 'apt-get install -y pgbouncer', 'npm run demo', 'npm test']) {
    expect(readme.indexOf(word), `${word} before the contributors' heading`).toBeGreaterThan(contributors);
  }
  expect(readme.slice(0, readme.indexOf('## A first consumer'))).toMatch(/ids? of the producer's choosing/i);
});
