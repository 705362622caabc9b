/**
 * The `npx once` check's parsing: the lines of a Markdown file's code blocks, and whether a line
 * runs the `once` command in a way that may fetch the registry's unrelated `once` package.
 */

/** Every line inside a fenced code block (any language), with its 1-based line number. */
export function codeLines(md: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let fence: string | undefined;
  md.split('\n').forEach((raw, i) => {
    const text = raw.replace(/\r$/, '');
    const marker = /^\s*(`{3,}|~{3,})/.exec(text);
    if (marker) {
      if (fence === undefined) fence = marker[1];
      else if (marker[1]?.[0] === fence[0] && (marker[1]?.length ?? 0) >= fence.length) fence = undefined;
      return;
    }
    if (fence !== undefined) out.push({ line: i + 1, text });
  });
  return out;
}

/**
 * True when a line runs the `once` command through npx or `npm exec` in a way that may fetch the
 * registry's `once`: neither `--no-install` nor `-p`/`--package` `@once/cli` among the options.
 */
export function runsForeignOnce(line: string): boolean {
  for (const m of line.matchAll(/\b(?:npx|npm\s+exec)((?:\s+[^\s;&|`'"]+)+)/g)) {
    const words = (m[1] ?? '').trim().split(/\s+/);
    let safe = false;
    for (let i = 0; i < words.length; i++) {
      const w = words[i] ?? '';
      if (w === '--') continue;
      if (w === '--no-install' || w === '--offline') {
        safe = safe || w === '--no-install';
        continue;
      }
      if (w === '-p' || w === '--package') {
        if (words[i + 1] === '@once/cli' || words[i + 1]?.startsWith('@once/cli@')) safe = true;
        i++;
        continue;
      }
      if (w.startsWith('--package=')) {
        const pkg = w.slice('--package='.length);
        if (pkg === '@once/cli' || pkg.startsWith('@once/cli@')) safe = true;
        continue;
      }
      if (w.startsWith('-')) continue;
      // The first word that is not an option is the command npx runs.
      if (w === 'once' || w.startsWith('once@')) return !safe;
      break;
    }
  }
  return false;
}
