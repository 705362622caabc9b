import { describe, expect, it } from 'vitest';
import { Gate } from '../../src/adapter/isolation-gate.js';

const tick = () => new Promise((r) => setTimeout(r, 0));

describe('Gate', () => {
  it('lets shared holders in together, and an exclusive one only when they have all left', async () => {
    const gate = new Gate();
    const a = await gate.shared();
    const b = await gate.shared();
    let alone = false;
    const x = gate.exclusive().then((leave) => {
      alone = true;
      return leave;
    });
    await tick();
    expect(alone).toBe(false);
    a();
    await tick();
    expect(alone).toBe(false);
    b();
    (await x)();
    expect(alone).toBe(true);
  });

  it('keeps new shared holders out while an exclusive one waits or runs (no starvation)', async () => {
    const gate = new Gate();
    const first = await gate.shared();
    const order: string[] = [];
    const x = gate.exclusive().then((leave) => {
      order.push('exclusive');
      return leave;
    });
    const late = gate.shared().then((leave) => {
      order.push('late shared');
      return leave;
    });
    await tick();
    expect(order).toEqual([]);
    first();
    const leaveX = await x;
    await tick();
    expect(order).toEqual(['exclusive']);
    leaveX();
    leaveX(); // leaving twice is harmless
    (await late)();
    expect(order).toEqual(['exclusive', 'late shared']);
  });

  it('tryShared enters at once while the gate is open, and refuses (entering nothing) while an exclusive holder runs or waits', async () => {
    const gate = new Gate();
    const a = gate.tryShared();
    expect(a).toBeTypeOf('function');
    let alone = false;
    const x = gate.exclusive().then((leave) => {
      alone = true;
      return leave;
    });
    // A writer waits: no new shared holder, with or without waiting.
    expect(gate.tryShared()).toBeUndefined();
    await tick();
    expect(alone).toBe(false);
    a!();
    const leaveX = await x;
    expect(alone).toBe(true);
    expect(gate.tryShared()).toBeUndefined();
    leaveX();
    // Open again; a refused tryShared left no holder behind, so an exclusive one gets in.
    const b = gate.tryShared();
    expect(b).toBeTypeOf('function');
    b!();
    (await gate.exclusive())();
  });

  it('runs exclusive holders one at a time', async () => {
    const gate = new Gate();
    let inside = 0;
    let most = 0;
    await Promise.all(
      Array.from({ length: 5 }, async () => {
        const leave = await gate.exclusive();
        inside++;
        most = Math.max(most, inside);
        await new Promise((r) => setTimeout(r, 2));
        inside--;
        leave();
      }),
    );
    expect(most).toBe(1);
  });
});
