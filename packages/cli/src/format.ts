import { escapeText } from './escape-text.js';

/**
 * Pure formatting for human output: durations, timestamps, byte previews, tables. No I/O,
 * so unit tests pin every shape.
 */

/** `3d 4h`, `2h 5m`, `4m 12s`, `12s`, `850ms`: the two largest units of a duration in seconds. */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '-';
  const s = Math.max(0, seconds);
  if (s < 1) return `${Math.round(s * 1000)}ms`;
  const units: [string, number][] = [
    ['d', 86_400],
    ['h', 3_600],
    ['m', 60],
    ['s', 1],
  ];
  let rest = Math.floor(s);
  const parts: string[] = [];
  for (const [name, size] of units) {
    const n = Math.floor(rest / size);
    if (n > 0 || parts.length > 0) parts.push(`${n}${name}`);
    rest -= n * size;
    if (parts.length === 2) break;
  }
  return parts.filter((p, i) => i === 0 || !p.startsWith('0')).join(' ');
}

/** An ISO-8601 UTC timestamp, or `-`. */
export function formatTime(at: Date | null | undefined): string {
  return at instanceof Date && !Number.isNaN(at.getTime()) ? at.toISOString() : '-';
}

/** A byte count with a unit: `512 B`, `1.5 KiB`, `2.0 MiB`. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** Lower-case hex of a buffer, or `-`. */
export function hex(buf: Buffer | null | undefined): string {
  return buf ? buf.toString('hex') : '-';
}

/** How a body preview reads: as text when it is printable UTF-8, else as hex. */
export interface BodyPreview {
  readonly encoding: 'utf8' | 'hex';
  readonly text: string;
  /** True when the preview shows fewer bytes than the body has. */
  readonly cut: boolean;
}

/**
 * The first `maxBytes` of a body, shown as text when they decode as UTF-8 without control
 * characters (newlines and tabs are escaped), else as hex. C1 controls (U+0080 to U+009F, valid
 * UTF-8) count as control characters: a terminal acts on them as on ESC sequences. A cut in the
 * middle of a multi-byte character does not make a text body look binary.
 */
export function previewBody(body: Buffer, maxBytes: number): BodyPreview {
  const cut = body.length > maxBytes;
  const head = body.subarray(0, maxBytes);
  const text = decodeUtf8(head, cut);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: detecting control characters is the point
  if (text !== undefined && !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/.test(text)) {
    return {
      encoding: 'utf8',
      text: text.replace(/\r/g, '\\r').replace(/\n/g, '\\n').replace(/\t/g, '\\t'),
      cut,
    };
  }
  return { encoding: 'hex', text: head.toString('hex'), cut };
}

function decodeUtf8(bytes: Buffer, cut: boolean): string | undefined {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  // A cut body may end inside a character: drop up to 3 trailing bytes before giving up.
  for (let drop = 0; drop <= (cut ? 3 : 0); drop++) {
    try {
      return decoder.decode(bytes.subarray(0, bytes.length - drop));
    } catch {}
  }
  return undefined;
}

/**
 * Columns padded to their widest cell, two spaces apart; the last column is not padded. Every
 * cell is escaped ({@link escapeText}): a cell holds no control character, so a value from the
 * database can neither add a row nor move the cursor.
 */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const head = header.map(escapeText);
  const body = rows.map((r) => r.map(escapeText));
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(head), ...body.map(line)].join('\n');
}

/** The value of a JSON column for one line of text: compact JSON, cut to `max` characters. */
export function oneLine(value: unknown, max = 80): string {
  if (value === null || value === undefined) return '-';
  const s = typeof value === 'string' ? value : JSON.stringify(value);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}
