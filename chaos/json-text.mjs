// The text of a summary in chaos/results as the repo's formatter (biome, 110 columns) would write
// it, so a result file can be committed as the run wrote it: JSON.stringify's two-space layout,
// except that an array of plain values stays on one line where that line fits.
const WIDTH = 110;

/** `value` as formatted JSON text (no trailing newline). */
export function jsonText(value) {
  const text = (v, indent, used) => {
    if (Array.isArray(v)) {
      if (v.length === 0) return '[]';
      if (v.every((x) => x === null || typeof x !== 'object')) {
        const one = `[${v.map((x) => JSON.stringify(x ?? null)).join(', ')}]`;
        // The line also holds what came before and, maybe, a comma after.
        if (used + one.length + 1 <= WIDTH) return one;
      }
      const inner = `${indent}  `;
      return `[\n${v.map((x) => inner + text(x ?? null, inner, inner.length)).join(',\n')}\n${indent}]`;
    }
    if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v).filter(([, x]) => x !== undefined && typeof x !== 'function');
      if (entries.length === 0) return '{}';
      const inner = `${indent}  `;
      const lines = entries.map(([k, x]) => {
        const key = `${inner}${JSON.stringify(k)}: `;
        return key + text(x, inner, key.length);
      });
      return `{\n${lines.join(',\n')}\n${indent}}`;
    }
    return JSON.stringify(v);
  };
  return text(value, '', 0);
}
