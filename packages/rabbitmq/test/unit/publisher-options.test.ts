import { ErrorCode, OnceError } from '@once/core';
import { describe, expect, it } from 'vitest';
import { createRabbitPublisher } from '../../src/index.js';

// The publisher refuses an option key it does not know, as the consumer does (splitOptions): a
// misspelt key would otherwise be ignored and its default silently used. The check runs before
// any other, so no broker or client is needed.
const refusal = (options: unknown): OnceError => {
  try {
    createRabbitPublisher(options as Parameters<typeof createRabbitPublisher>[0]);
  } catch (err) {
    if (OnceError.is(err)) return err;
    throw err;
  }
  throw new Error('createRabbitPublisher accepted the options');
};

describe('createRabbitPublisher: option keys', () => {
  it('refuses an unknown key, naming the factory and the key', () => {
    const e = refusal({ colour: 'red' });
    expect(e.code).toBe(ErrorCode.InvalidOption);
    expect(e.message).toBe("createRabbitPublisher: option 'colour' is unknown");
  });

  it('refuses a misspelt key and suggests the nearest name', () => {
    const e = refusal({ confirmTimeoutMS: 1000 });
    expect(e.code).toBe(ErrorCode.InvalidOption);
    expect(e.message).toBe(
      "createRabbitPublisher: option 'confirmTimeoutMS' is unknown; did you mean 'confirmTimeoutMs'?",
    );
  });
});
