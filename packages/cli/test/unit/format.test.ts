import { describe, expect, it } from 'vitest';
import {
  formatBytes,
  formatDuration,
  formatTable,
  formatTime,
  hex,
  oneLine,
  previewBody,
} from '../../src/format.js';

describe('formatDuration', () => {
  it.each([
    [0.25, '250ms'],
    [0, '0ms'],
    [12, '12s'],
    [60, '1m'],
    [252, '4m 12s'],
    [3600, '1h'],
    [7500, '2h 5m'],
    [86_400 * 3 + 3600 * 4 + 59, '3d 4h'],
    [86_400 + 30, '1d'],
    [-5, '0ms'],
  ])('%s s → %s', (s, text) => {
    expect(formatDuration(s)).toBe(text);
  });
  it('unknown is a dash', () => {
    expect(formatDuration(null)).toBe('-');
    expect(formatDuration(Number.NaN)).toBe('-');
  });
});

describe('previewBody', () => {
  it('printable UTF-8 is text, with newlines and tabs escaped', () => {
    expect(previewBody(Buffer.from('{"a":"b\n\tc"}'), 100)).toEqual({
      encoding: 'utf8',
      text: '{"a":"b\\n\\tc"}',
      cut: false,
    });
  });
  it('binary is hex', () => {
    expect(previewBody(Buffer.from([0, 1, 255]), 100)).toEqual({
      encoding: 'hex',
      text: '0001ff',
      cut: false,
    });
  });
  it('a cut inside a multi-byte character still reads as text', () => {
    const body = Buffer.from('aé€x');
    const p = previewBody(body, 4); // 'a' + 'é' (2 bytes) + the first byte of '€'
    expect(p).toEqual({ encoding: 'utf8', text: 'aé', cut: true });
  });
  it('invalid UTF-8 that was not cut is hex', () => {
    expect(previewBody(Buffer.from([0x61, 0xc3]), 10).encoding).toBe('hex');
  });
  it('control characters make it hex', () => {
    expect(previewBody(Buffer.from('a\u0007b'), 10).encoding).toBe('hex');
  });
  it('maxBytes 0 is an empty, cut preview', () => {
    expect(previewBody(Buffer.from('abc'), 0)).toEqual({ encoding: 'utf8', text: '', cut: true });
  });
});

describe('formatTable', () => {
  it('pads every column but the last, two spaces apart', () => {
    expect(
      formatTable(
        ['consumer', 'n', 'note'],
        [
          ['a', '10', 'x'],
          ['longer-name', '2', ''],
        ],
      ),
    ).toBe(['consumer     n   note', 'a            10  x', 'longer-name  2'].join('\n'));
  });
});

describe('small formats', () => {
  it('bytes', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(2 * 1024 * 1024)).toBe('2.0 MiB');
  });
  it('time, hex, oneLine', () => {
    expect(formatTime(new Date('2026-01-02T03:04:05.006Z'))).toBe('2026-01-02T03:04:05.006Z');
    expect(formatTime(null)).toBe('-');
    expect(hex(Buffer.from([0xab, 0x01]))).toBe('ab01');
    expect(hex(null)).toBe('-');
    expect(oneLine({ a: 1 })).toBe('{"a":1}');
    expect(oneLine(null)).toBe('-');
    expect(oneLine('x'.repeat(100), 10)).toBe(`${'x'.repeat(9)}…`);
  });
});
