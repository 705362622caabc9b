import type { SQSClient } from '@aws-sdk/client-sqs';

/** A recorded call: the command's class name and its input. */
export interface Call {
  name: string;
  input: Record<string, unknown>;
}

/** A stand-in for SQSClient that records commands and answers with `respond`. */
export function fakeClient(respond: (call: Call) => unknown): { client: SQSClient; calls: Call[] } {
  const calls: Call[] = [];
  const client = {
    send: async (command: { constructor: { name: string }; input: Record<string, unknown> }) => {
      const call = { name: command.constructor.name, input: command.input };
      calls.push(call);
      return respond(call);
    },
  } as unknown as SQSClient;
  return { client, calls };
}
