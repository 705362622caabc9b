import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { escapeLines, escapeText, showName } from '../../src/escape-text.js';
import { formatTable } from '../../src/format.js';
import { jsonText, quote } from '../../src/json-text.js';

// The reference: code point by code point, numbers compared rather than a pattern, C0 escaped as
// JSON.stringify escapes it (its own table), DEL and C1 as \u00XX by hand.
function isControl(cp: number): boolean {
  return cp <= 0x1f || (cp >= 0x7f && cp <= 0x9f);
}
function reference(s: string): string {
  let out = '';
  for (const ch of s) {
    const cp = ch.codePointAt(0) ?? 0;
    if (cp <= 0x1f) out += JSON.stringify(ch).slice(1, -1);
    else if (isControl(cp)) out += `\\u00${cp.toString(16)}`;
    else out += ch;
  }
  return out;
}
function hasControl(s: string): boolean {
  for (const ch of s) if (isControl(ch.codePointAt(0) ?? 0)) return true;
  return false;
}

const control = fc
  .integer({ min: 0, max: 0x9f })
  .filter((cp) => isControl(cp))
  .map((cp) => String.fromCodePoint(cp));
/** Any string, with controls (C0, DEL, C1) far more often than uniform sampling gives them. */
const anyText = fc
  .array(
    fc.oneof(control, fc.string({ unit: 'binary', maxLength: 4 }), fc.constantFrom('\\', '"', '\\u001b')),
    {
      maxLength: 12,
    },
  )
  .map((parts) => parts.join(''));
/** Printable text: any code point but the controls (lone surrogates included). */
const printable = fc.string({ unit: 'binary', maxLength: 40 }).filter((s) => !hasControl(s));

describe('escapeText', () => {
  it('matches the reference on any text', () => {
    fc.assert(
      fc.property(anyText, (s) => {
        expect(escapeText(s)).toBe(reference(s));
      }),
      { numRuns: 2000 },
    );
  });

  it('no C0, DEL or C1 character survives', () => {
    fc.assert(
      fc.property(anyText, (s) => {
        expect(hasControl(escapeText(s))).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });

  it('printable text is left exactly as it is', () => {
    fc.assert(
      fc.property(printable, (s) => {
        expect(escapeText(s)).toBe(s);
      }),
      { numRuns: 2000 },
    );
  });

  it('is idempotent', () => {
    fc.assert(
      fc.property(anyText, (s) => {
        expect(escapeText(escapeText(s))).toBe(escapeText(s));
      }),
    );
  });

  it('reads back as JSON string content when the text has no backslash or quote', () => {
    fc.assert(
      fc.property(
        anyText.filter((s) => !s.includes('\\') && !s.includes('"')),
        (s) => {
          expect(JSON.parse(`"${escapeText(s)}"`)).toBe(s);
        },
      ),
    );
  });

  it('examples: ESC, CSI as one C1 character, DEL, NEL, a forged newline', () => {
    expect(escapeText('\u001b[2K\r')).toBe('\\u001b[2K\\r');
    expect(escapeText('\u009b2J')).toBe('\\u009b2J');
    expect(escapeText('a\u007fb\u0085c')).toBe('a\\u007fb\\u0085c');
    expect(escapeText('row\nforged\tcell')).toBe('row\\nforged\\tcell');
    expect(escapeText('C:\\path "quoted" é 日本 \u00a0')).toBe('C:\\path "quoted" é 日本 \u00a0');
  });
});

describe('escapeLines', () => {
  it('is escapeText on every line, newlines kept', () => {
    fc.assert(
      fc.property(anyText, (s) => {
        expect(escapeLines(s)).toBe(s.split('\n').map(reference).join('\n'));
      }),
      { numRuns: 1000 },
    );
  });
});

describe('showName', () => {
  // Blanks as String.prototype.trim sees them, the test's own way of finding an edge a terminal hides.
  const blank = (ch: string | undefined) => ch !== undefined && ch.length > 0 && ch.trim() === '';
  const edgy = (shown: string) => {
    const chars = [...shown];
    return chars.length === 0 || blank(chars[0]) || blank(chars.at(-1)) || chars[0] === '"';
  };
  const names = fc
    .array(fc.oneof(anyText, fc.constantFrom(' ', '\u00a0', '\u2003', '\u3000', '\ufeff', '\u2028', '"')), {
      maxLength: 4,
    })
    .map((parts) => parts.join(''));

  it('is escapeText where the edges show, and a JSON string literal of the name where they would not', () => {
    fc.assert(
      fc.property(names, (s) => {
        const out = showName(s);
        expect(hasControl(out)).toBe(false);
        if (edgy(reference(s))) expect(JSON.parse(out)).toBe(s);
        else expect(out).toBe(reference(s));
      }),
      { numRuns: 3000 },
    );
  });

  it('two names that differ only at their edges never print alike, and no printed name ends in a blank', () => {
    fc.assert(
      fc.property(
        printable.filter((s) => !s.includes('"')),
        fc.constantFrom('', ' ', '\u00a0', '\u3000', '"'),
        fc.constantFrom('', ' ', '\u00a0', '\u3000'),
        (core, before, after) => {
          const a = showName(core);
          const b = showName(`${before}${core}${after}`);
          if (before !== '' || after !== '') expect(a).not.toBe(b);
          expect(blank([...b].at(-1))).toBe(false);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('examples', () => {
    expect(showName('m-1')).toBe('m-1');
    expect(showName('m-1 ')).toBe('"m-1 "');
    expect(showName(' m-1')).toBe('" m-1"');
    expect(showName('"m-1"')).toBe('"\\"m-1\\""');
    expect(showName('m-"1"')).toBe('m-"1"');
    expect(showName('')).toBe('""');
    expect(showName('m-1\r')).toBe('m-1\\r');
    expect(showName('m-1\u0085 ')).toBe('"m-1\\u0085 "');
  });
});

describe('jsonText and quote', () => {
  const json = fc.jsonValue({ stringUnit: fc.oneof(control, fc.string({ unit: 'binary', maxLength: 1 })) });

  it('parse back to the value JSON.stringify writes, with no control character but indentation', () => {
    fc.assert(
      fc.property(json, fc.constantFrom(undefined, 2), (v, indent) => {
        const text = jsonText(v, indent);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(v)));
        expect(hasControl(text.replaceAll('\n', ''))).toBe(false);
      }),
      { numRuns: 1000 },
    );
  });

  it('quote is a JSON string literal of the text', () => {
    fc.assert(
      fc.property(anyText, (s) => {
        expect(JSON.parse(quote(s))).toBe(s);
        expect(hasControl(quote(s))).toBe(false);
      }),
      { numRuns: 1000 },
    );
    expect(quote('a\u009bb\u007f')).toBe('"a\\u009bb\\u007f"');
  });
});

describe('formatTable', () => {
  it('one line per row and no control character, whatever the cells hold', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(anyText, anyText, anyText), { maxLength: 5 }), (rows) => {
        const out = formatTable(['a', 'b', 'c'], rows);
        expect(out.split('\n')).toHaveLength(rows.length + 1);
        expect(hasControl(out.replaceAll('\n', ''))).toBe(false);
        rows.forEach(([first], i) => {
          expect(out.split('\n')[i + 1]?.startsWith(reference(first))).toBe(true);
        });
      }),
    );
  });
});
