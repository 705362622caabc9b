import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { killAllChildren, startChild } from '../support/index.js';

const script = fileURLToPath(new URL('./fixtures/ticker.mjs', import.meta.url));
const n = (line: { json: unknown }) => (line.json as { n: number } | undefined)?.n;

afterEach(killAllChildren);

describe('child runner', () => {
  it('waits for a JSON line, SIGKILLs, restarts with a new run number', async () => {
    const child = startChild({ script, env: { TICKER_TAG: 'x' } });
    const third = await child.waitForLine((l) => n(l) === 3);
    expect(third.json).toEqual({ n: 3, tag: 'x' });
    expect(third.run).toBe(0);
    expect(await child.kill()).toEqual({ code: null, signal: 'SIGKILL' });
    expect(child.running).toBe(false);
    await child.restart();
    const again = await child.waitForLine((l) => l.run === 1 && n(l) === 1);
    expect(again.text).toBe('{"n":1,"tag":"x"}');
    expect(child.runs).toBe(2);
  });

  it('reports a normal exit, and rejects a wait for a line that never comes', async () => {
    const child = startChild({ script, args: ['2'] });
    expect(await child.waitForExit(5000)).toEqual({ code: 0, signal: null });
    expect(child.stderr).toContain('done');
    await expect(child.waitForLine((l) => n(l) === 99, 5000)).rejects.toThrow(/exited before/);
  });

  it('kills after a random delay within the range', async () => {
    const child = startChild({ script });
    const exit = await child.killAfterRandom(30, 60);
    expect(exit.signal).toBe('SIGKILL');
    expect(exit.afterMs).toBeGreaterThanOrEqual(30);
    expect(exit.afterMs).toBeLessThanOrEqual(60);
  });
});
