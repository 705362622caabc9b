/**
 * The known name nearest to a mistyped one, for "did you mean" in option errors. Optimal string
 * alignment distance (Levenshtein plus adjacent swaps, so `bacth` is one edit from `batch`),
 * case-insensitive. Written here rather than taken from a library: core's only runtime
 * dependency is `pg`, and this is a dozen lines over names of a few dozen characters.
 */
export function nearest(name: string, known: readonly string[]): string | undefined {
  const a = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const d = distance(a, candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  // Past half the name's length the "nearest" name is a guess, not a typo: say nothing.
  return bestDistance <= Math.max(2, Math.floor(a.length / 2)) ? best : undefined;
}

function distance(a: string, b: string): number {
  const rows: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      const row = rows[i]!;
      let d = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      row[j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}
