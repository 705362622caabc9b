import type { ConnectionOptions } from '@nats-io/transport-node';

/**
 * What once sets on the NATS connections it opens (`servers` given, no `connection`): a client
 * ping every 10 s and at most 2 unanswered, so a path that goes dark is taken for stale and
 * reconnected within about 20 to 30 s (the client's defaults, 2 minutes and 2, take 4 to 6
 * minutes); and a 10 s deadline on each connect. A connection of your own keeps its settings.
 */
export const NATS_LIVENESS = Object.freeze({ pingInterval: 10_000, maxPingOut: 2, timeout: 10_000 });

/** The options of a connection once opens. */
export function ownConnectOptions(servers: readonly string[], name: string): ConnectionOptions {
  return { servers: [...servers], maxReconnectAttempts: -1, name, ...NATS_LIVENESS };
}
