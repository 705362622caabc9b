import type { Logger } from '@once/core';

/** The two timeouts of the SQS client's HTTP handler (`@smithy/node-http-handler`), in ms. */
export interface ClientTimeouts {
  requestTimeout: number | undefined;
  connectionTimeout: number | undefined;
}

interface HandlerLike {
  /** Resolved lazily by NodeHttpHandler, before its first request. */
  configProvider?: Promise<Record<string, unknown> | undefined>;
  httpHandlerConfigs?(): Record<string, unknown>;
}

/**
 * The request and connection timeouts the client's HTTP handler will use, or `undefined` when
 * its handler is not one whose settings can be read (a custom handler: left to its author).
 */
export async function clientTimeouts(client: unknown): Promise<ClientTimeouts | undefined> {
  const handler = (client as { config?: { requestHandler?: HandlerLike } })?.config?.requestHandler;
  if (!handler || typeof handler !== 'object') return undefined;
  let config: Record<string, unknown> | undefined;
  try {
    config = (await handler.configProvider) ?? handler.httpHandlerConfigs?.();
  } catch {
    return undefined;
  }
  if (!config || typeof config !== 'object') return undefined;
  const ms = (v: unknown) => (typeof v === 'number' && v > 0 ? v : undefined);
  return { requestTimeout: ms(config.requestTimeout), connectionTimeout: ms(config.connectionTimeout) };
}

/**
 * At start, one warning when the client's HTTP handler has no request or connection timeout:
 * without them a request whose path went dark waits for TCP (minutes), the receive loop and the
 * visibility heartbeat with it, while the broker sees no one extend or delete the messages.
 * Returns the settings that are missing.
 */
export async function warnIfNoClientTimeouts(
  client: unknown,
  logger: Logger,
  waitTimeSeconds: number,
): Promise<string[]> {
  const t = await clientTimeouts(client);
  if (!t) return [];
  const missing = [
    ...(t.requestTimeout === undefined ? ['requestTimeout'] : []),
    ...(t.connectionTimeout === undefined ? ['connectionTimeout'] : []),
  ];
  if (missing.length > 0) {
    logger.warn(
      { missing, suggested: { requestTimeout: waitTimeSeconds * 1000 + 10_000, connectionTimeout: 5_000 } },
      `once/sqs: the SQS client's requestHandler has no ${missing.join(' and no ')}: a dark network path stalls receives and visibility extensions until TCP gives up (docs/sqs.md)`,
    );
  }
  return missing;
}
