import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ErrorCode, OnceError, type PgPoolLike } from '../../src/index.js';
import { checkDatabases } from '../../src/schema/databases.js';

// Only the check of the set runs here: its pools are never asked for a connection.
const pool: PgPoolLike = {
  connect: () => Promise.reject(new Error('not used')),
  query: () => Promise.reject(new Error('not used')),
};

const ALLOWED = new Set('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-');
/** The rule written out character by character, apart from the regex under test. */
function reference(name: string): boolean {
  return name.length >= 1 && name.length <= 63 && [...name].every((c) => ALLOWED.has(c));
}

function refusal(databases: unknown): OnceError | undefined {
  try {
    checkDatabases(databases);
    return undefined;
  } catch (err) {
    if (!OnceError.is(err)) throw err;
    return err;
  }
}

describe('checkDatabases', () => {
  it('takes a name exactly when the reference does, and names the refused one', () => {
    const near = fc.constantFrom(...'aZ09_.- /:é\u0000"\'\n@$'.split(''));
    const name = fc.oneof(
      fc.string({ unit: near, minLength: 0, maxLength: 70 }),
      fc.string({ unit: 'grapheme', maxLength: 70 }),
      fc.string({ unit: fc.constantFrom('a', '9', '_'), minLength: 60, maxLength: 66 }),
    );
    fc.assert(
      fc.property(name, (n) => {
        const err = refusal({ ok: pool, [n]: pool });
        if (reference(n)) expect(err).toBeUndefined();
        else {
          expect(err?.code).toBe(ErrorCode.InvalidOption);
          expect(err?.message).toContain(`option 'databases.${n}'`);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('refuses an empty set, a set that is not an object, and a value that is not a pool', () => {
    expect(refusal({})?.message).toBe("option 'databases' must name at least one database");
    expect(refusal([pool])?.message).toMatch(/^option 'databases' must be an object/);
    expect(refusal(null)?.code).toBe(ErrorCode.InvalidOption);
    expect(refusal({ a: pool, 'tenant-b': 'postgres://x' })?.message).toBe(
      "option 'databases.tenant-b' must be a pg Pool, got string",
    );
    expect(refusal({ 'tenant a': pool })?.message).toContain(
      "option 'databases.tenant a' is not a database name",
    );
  });
});
