import type { Options } from 'amqplib';

/**
 * The AMQP heartbeat once asks for on the connections it opens, in seconds, when the URL or the
 * connect options name none. Without it amqplib takes the broker's (RabbitMQ: 60 s), and a path
 * that goes dark is noticed after two missed heartbeats: here 15 to 30 s, not 60 to 120 s. The
 * broker applies the same timeout on its side, closing the connection and requeueing its
 * unacknowledged deliveries.
 */
export const DEFAULT_HEARTBEAT_S = 15;

/** `url` with `heartbeat` set to {@link DEFAULT_HEARTBEAT_S} unless it already names one. */
export function withHeartbeat(url: string | Options.Connect): string | Options.Connect {
  if (typeof url !== 'string')
    return url.heartbeat === undefined ? { ...url, heartbeat: DEFAULT_HEARTBEAT_S } : url;
  const u = new URL(url);
  if (u.searchParams.has('heartbeat')) return url;
  u.searchParams.set('heartbeat', String(DEFAULT_HEARTBEAT_S));
  return u.toString();
}

/** The consumer's connect and handshake deadline (amqplib's `socketOptions.timeout`), in ms. */
export const CONNECT_TIMEOUT_MS = 10_000;
