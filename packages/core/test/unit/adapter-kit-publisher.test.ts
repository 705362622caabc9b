import { describe, expect, it } from 'vitest';
import { Connector, checkMessageId, settledResults, untilAborted } from '../../src/adapter/index.js';
import { ErrorCode, OnceError } from '../../src/errors.js';

describe('Connector', () => {
  it('opens once for concurrent callers, forgets a failed opening, and refuses after stop', async () => {
    let opened = 0;
    const connector = new Connector(async () => {
      opened++;
      if (opened === 1) throw new Error('refused');
      return `link-${opened}`;
    }, 'the test publisher is stopped');
    const [a, b] = await Promise.allSettled([connector.get(), connector.get()]);
    expect(a).toMatchObject({ status: 'rejected', reason: { message: 'refused' } });
    expect(b).toMatchObject({ status: 'rejected', reason: { message: 'refused' } });
    expect(await connector.get()).toBe('link-2');
    expect(await connector.get()).toBe('link-2');
    expect(opened).toBe(2);
    expect(await connector.stop()).toBe('link-2');
    expect(connector.stopped).toBe(true);
    expect(await connector.stop()).toBeUndefined();
    await expect(connector.get()).rejects.toMatchObject({
      code: ErrorCode.Closed,
      message: 'the test publisher is stopped',
    });
  });

  it('a drop is granted once, to the holder of the current opening; a lost connection is reopened', async () => {
    const lost: (() => void)[] = [];
    let opened = 0;
    const connector = new Connector(async (onLost) => {
      lost.push(onLost);
      return ++opened;
    }, 'stopped');
    const first = connector.get();
    await first;
    expect(connector.drop(first)).toBe(true);
    expect(connector.drop(first)).toBe(false);
    const second = connector.get();
    expect(await second).toBe(2);
    lost[0]!(); // the first connection's close event, late: the second one stays
    expect(connector.get()).toBe(second);
    lost[1]!();
    expect(await connector.get()).toBe(3);
  });
});

describe('untilAborted', () => {
  it('runs onAbort only when the signal wins, including one aborted beforehand', async () => {
    const aborts: string[] = [];
    const controller = new AbortController();
    const never = new Promise<never>(() => {});
    const waiting = untilAborted(never, controller.signal, () => aborts.push('late'));
    controller.abort(new Error('deadline'));
    await expect(waiting).rejects.toThrow('deadline');
    await expect(
      untilAborted(Promise.resolve(1), new AbortController().signal, () => aborts.push('x')),
    ).resolves.toBe(1);
    const failing = Promise.reject(new Error('broker said no'));
    await expect(untilAborted(failing, controller.signal, () => aborts.push('early'))).rejects.toThrow(
      'deadline',
    );
    expect(aborts).toEqual(['late', 'early']);
  });
});

describe('checkMessageId and settledResults', () => {
  it('refuses an unusable id and reports each send, permanent codes not retryable', () => {
    expect(() => checkMessageId({ id: '' })).toThrow(
      expect.objectContaining({ code: ErrorCode.InvalidId }) as Error,
    );
    expect(() => checkMessageId(undefined)).toThrow('an outbox message needs a non-empty string id');
    checkMessageId({ id: 'a' });
    const sent: string[] = [];
    const results = settledResults(
      [{ id: 'a' }, { id: 'b' }, { id: 'c' }],
      [
        { status: 'fulfilled', value: 'ack-a' },
        { status: 'rejected', reason: new OnceError(ErrorCode.InvalidId, 'bad') },
        { status: 'rejected', reason: new Error('socket closed') },
      ],
      new Set([ErrorCode.InvalidId]),
      (value, id) => sent.push(`${id}:${value}`),
    );
    expect(sent).toEqual(['a:ack-a']);
    expect(results).toMatchObject([
      { id: 'a', ok: true },
      { id: 'b', ok: false, retryable: false, error: { code: ErrorCode.InvalidId, message: 'bad' } },
      { id: 'c', ok: false, retryable: true, error: { message: 'socket closed' } },
    ]);
  });
});
