import { describe, expect, it } from 'vitest';
import { maskUrl } from '../../src/mask-url.js';

describe('maskUrl', () => {
  it.each([
    ['postgres://u:secret@h:5432/db', 'postgres://u:***@h:5432/db'],
    ['postgres://u@h/db', 'postgres://u@h/db'],
    ['postgres://h/db?password=secret&sslmode=require', 'postgres://h/db?password=***&sslmode=require'],
    ['postgresql://u:p%40ss@h/db', 'postgresql://u:***@h/db'],
    ['not a url u:secret@', 'not a url u:***@'],
    ['postgres:/u:secret@h/db', 'postgres:/u:***@h/db'],
    ['//u:secret@host', '//u:***@host'],
    ['host=h password=secret', 'host=h password=***'],
  ])('%s', (url, masked) => {
    expect(maskUrl(url)).toBe(masked);
    if (url.includes('secret')) expect(maskUrl(url)).not.toContain('secret');
  });
});
