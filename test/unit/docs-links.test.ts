import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { docFiles } from './doc-samples.js';

// The docs stand alone: every link resolves to a file in this repository, and none leaves it.
const root = fileURLToPath(new URL('../../', import.meta.url));

/** Every markdown file a user reads: the docs' own list, plus CHANGELOG.md and chaos/README.md. */
function markdownFiles(): string[] {
  return docFiles(root, { tree: ['docs'], extra: ['CHANGELOG.md', 'chaos/README.md'] });
}

/** Links in prose, `[text](target)`, outside fenced code blocks and inline code. */
function linksOf(md: string): { line: number; target: string }[] {
  const links: { line: number; target: string }[] = [];
  let fence: string | undefined;
  md.split('\n').forEach((text, i) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(text);
    if (open) {
      if (fence === undefined) fence = open[1];
      else if (open[1]?.startsWith(fence)) fence = undefined;
      return;
    }
    if (fence !== undefined) return;
    const prose = text.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g))
      links.push({ line: i + 1, target: m[1] ?? '' });
  });
  return links;
}

it('every link in the docs resolves inside the repository', () => {
  const files = markdownFiles();
  expect(files.length).toBeGreaterThan(10);
  const bad: string[] = [];
  let checked = 0;
  for (const file of files) {
    for (const { line, target } of linksOf(readFileSync(join(root, file), 'utf8'))) {
      checked++;
      const where = `${file}:${line}: ${target}`;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
        bad.push(`${where} (leaves the repository)`);
        continue;
      }
      const path = target.split('#')[0] ?? '';
      if (path === '') continue; // an anchor on the same page
      const resolved = join(dirname(join(root, file)), decodeURIComponent(path));
      if (relative(root, resolved).startsWith('..')) bad.push(`${where} (outside the repository)`);
      else if (!existsSync(resolved)) bad.push(`${where} (no such file)`);
    }
  }
  expect(checked).toBeGreaterThan(20);
  expect(bad.join('\n')).toBe('');
});

/** Source and script files whose comments may name a section of a docs page. */
function sourceFiles(): string[] {
  const out: string[] = [];
  for (const top of ['packages', 'bench', 'scripts', 'chaos', 'test']) {
    for (const f of readdirSync(join(root, top), { recursive: true, encoding: 'utf8' })) {
      if (f.includes('node_modules') || f.includes('dist/') || f.includes('generated')) continue;
      if (/\.(ts|mts|mjs|js)$/.test(f)) out.push(`${top}/${f}`);
    }
  }
  return out;
}

/** The headings of a markdown page, without their leading hashes. */
function headingsOf(md: string): string[] {
  return md
    .split('\n')
    .filter((l) => /^#{1,6}\s/.test(l))
    .map((l) => l.replace(/^#+\s+/, ''));
}

it('a comment that names a section of a docs page names one that exists', () => {
  const bad: string[] = [];
  let checked = 0;
  for (const file of sourceFiles()) {
    const text = readFileSync(join(root, file), 'utf8').replace(/\n\s*(\/\/|\*)\s*/g, ' ');
    for (const m of text.matchAll(/(docs\/[\w/.-]+\.md),?\s*\(?"([^"]{3,80})"/g)) {
      const [, page = '', section = ''] = m;
      if (!existsSync(join(root, page))) {
        bad.push(`${file}: ${page} (no such page)`);
        continue;
      }
      checked++;
      const headings = headingsOf(readFileSync(join(root, page), 'utf8'));
      if (!headings.some((h) => h.startsWith(section) || h.includes(section)))
        bad.push(`${file}: ${page}, "${section}" (no such heading)`);
    }
  }
  expect(checked).toBeGreaterThan(2);
  expect(bad.join('\n')).toBe('');
});
