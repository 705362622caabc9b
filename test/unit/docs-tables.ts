/**
 * The table check's parsing: the Markdown tables of a file (outside code blocks) and the cells of
 * each row, as GitHub counts them: a row is split at `|` except an escaped `\\|` and one inside a
 * code span; the leading and trailing pipes are optional.
 */

/** The cells of one table row. */
export function cells(row: string): string[] {
  let line = row.trim();
  const out: string[] = [];
  let cur = '';
  let tick = 0; // the length of the open code span's backtick run, 0 outside one
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (ch === '\\' && line[i + 1] === '|') {
      cur += '\\|';
      i++;
      continue;
    }
    if (ch === '`') {
      let run = 1;
      while (line[i + run] === '`') run++;
      if (tick === 0) {
        // A code span opens only where a closing run of the same length follows.
        if (line.indexOf('`'.repeat(run), i + run) >= 0) tick = run;
      } else if (run === tick) tick = 0;
      cur += '`'.repeat(run);
      i += run - 1;
      continue;
    }
    if (ch === '|' && tick === 0) {
      out.push(cur);
      cur = '';
      continue;
    }
    cur += ch;
  }
  out.push(cur);
  line = '';
  if (row.trim().startsWith('|')) out.shift();
  if (row.trim().endsWith('|') && !row.trim().endsWith('\\|')) out.pop();
  return out.map((c) => c.trim());
}

const DELIMITER = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

/** A row whose cell count differs from its table's header. */
export interface BadRow {
  line: number;
  expected: number;
  found: number;
}

/** The rows of every table in `md` whose cell count is not the header's. */
export function badRows(md: string): BadRow[] {
  const lines = md.split('\n').map((l) => l.replace(/\r$/, ''));
  const bad: BadRow[] = [];
  let fence: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    const text = lines[i]!;
    const marker = /^\s*(`{3,}|~{3,})/.exec(text);
    if (marker) {
      if (fence === undefined) fence = marker[1];
      else if (marker[1]![0] === fence[0] && marker[1]!.length >= fence.length) fence = undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const next = lines[i + 1];
    if (!text.includes('|') || next === undefined || !DELIMITER.test(next) || !next.includes('-')) continue;
    const width = cells(text).length;
    const delim = cells(next).length;
    if (delim !== width) bad.push({ line: i + 2, expected: width, found: delim });
    let j = i + 2;
    for (; j < lines.length && lines[j]!.trim() !== '' && lines[j]!.includes('|'); j++) {
      const found = cells(lines[j]!).length;
      if (found !== width) bad.push({ line: j + 1, expected: width, found });
    }
    i = j - 1;
  }
  return bad;
}
