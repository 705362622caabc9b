import { SQSClient } from '@aws-sdk/client-sqs';
import { describe, expect, it, vi } from 'vitest';
import { clientTimeouts, warnIfNoClientTimeouts } from '../../src/client-timeouts.js';

// No request is sent: the clients only say what their HTTP handler would use.
const endpoint = 'http://127.0.0.1:1';
const logger = () => ({ debug() {}, info() {}, error() {}, warn: vi.fn() });

describe("the SQS client's timeouts", () => {
  it("reads the request and connection timeouts of the client's handler", async () => {
    const set = new SQSClient({
      region: 'us-east-1',
      endpoint,
      requestHandler: { requestTimeout: 30_000, connectionTimeout: 5_000 },
    });
    expect(await clientTimeouts(set)).toEqual({ requestTimeout: 30_000, connectionTimeout: 5_000 });
    expect(await clientTimeouts(new SQSClient({ region: 'us-east-1', endpoint }))).toEqual({
      requestTimeout: undefined,
      connectionTimeout: undefined,
    });
  });

  it('warns once at start for a client without them, naming what is missing and a value for each', async () => {
    const l = logger();
    expect(await warnIfNoClientTimeouts(new SQSClient({ region: 'us-east-1', endpoint }), l, 20)).toEqual([
      'requestTimeout',
      'connectionTimeout',
    ]);
    expect(l.warn).toHaveBeenCalledTimes(1);
    expect(l.warn.mock.calls[0]![0]).toMatchObject({
      suggested: { requestTimeout: 30_000, connectionTimeout: 5_000 },
    });
    const quiet = logger();
    const good = new SQSClient({
      region: 'us-east-1',
      endpoint,
      requestHandler: { requestTimeout: 30_000, connectionTimeout: 5_000 },
    });
    expect(await warnIfNoClientTimeouts(good, quiet, 20)).toEqual([]);
    expect(quiet.warn).not.toHaveBeenCalled();
  });
});
