/**
 * Consumer options an earlier 0.x took, with what replaced them (the CHANGELOG's rename tables):
 * an upgrade that still passes one is told the new spelling, where "is not an option" alone would
 * leave the user to search the changelog. Keyed by factory; `*` holds what every consumer retired.
 */
const RETIRED: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  '*': {
    fenceOf: 'was removed with offset fencing: every message is claimed with an inbox row; drop the option',
  },
  createKafkaConsumer: {
    processing: "became 'batch' (true for 'batch', false for 'message')",
    maxBatchSize: "became 'batchSize'",
    partitionConcurrency: "became 'concurrency'",
    idFromOffset: "became idFrom: 'offset'",
    messageIdHeader: "became 'idHeader'",
    offsetFencing:
      'was removed: every message is claimed with an inbox row (batched with batch: true); drop the option',
  },
  createRabbitConsumer: {
    maxRedeliveries: "was removed: use core's 'maxAttempts'",
  },
  createSqsConsumer: {
    idAttribute: "became 'idHeader'",
    deadLetter:
      "became 'deadLetterQueueUrl' ({ queueUrl: u } → u; 'discard' → false; 'redrive' → leave it unset)",
  },
};

/** What replaced a retired option of `factory`, or undefined when `key` was never one. */
export function retiredOption(factory: string, key: string): string | undefined {
  const own = RETIRED[factory];
  if (own !== undefined && Object.hasOwn(own, key)) return own[key];
  return Object.hasOwn(RETIRED['*'] ?? {}, key) ? RETIRED['*']?.[key] : undefined;
}
