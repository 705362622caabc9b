import type { ConnectionOptions } from 'node:tls';

/**
 * amqplib's socket options (the second argument of `connect`), declared here because amqplib
 * 0.10's typings (`@types/amqplib`) export no such type and our `.d.ts` must load against every
 * amqplib in the peer range. The fields are those of amqplib 2.x's `SocketOptions`, to which this
 * type is assignable: TLS and net options, plus amqplib's own below.
 */
export interface SocketOptionsLike extends ConnectionOptions {
  /** `TCP_NODELAY` on the socket. */
  noDelay?: boolean;
  /** The connect and handshake deadline, in ms. */
  timeout?: number;
  /** TCP keep-alive on the socket. */
  keepAlive?: boolean;
  /** Delay before the first keep-alive probe, in ms. */
  keepAliveDelay?: number;
  /** AMQP client properties sent with the handshake (`connection_name` shows in the management UI). */
  clientProperties?: Record<string, unknown>;
  /** A SASL mechanism other than PLAIN (e.g. amqplib's `credentials.external()`). */
  credentials?: {
    /** The SASL mechanism's name, as sent in the handshake (`EXTERNAL`). */
    mechanism: string;
    /** The mechanism's response bytes for the handshake. */
    response(): Buffer;
    /** The user name, for mechanisms that carry one. */
    username?: string;
    /** The password, for mechanisms that carry one. */
    password?: string;
  };
}
