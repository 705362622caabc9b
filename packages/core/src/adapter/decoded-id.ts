import type { Envelope } from '../message/envelope.js';

/**
 * The envelope's `idUnusable` for an id the broker's client handed over as text it had already
 * decoded as UTF-8 (an AMQP `messageId` or header, a NATS header). The decoder turns each invalid
 * sequence into U+FFFD, so two different byte ids would arrive as one: such an id is refused, not
 * guessed at. Spread the result into the envelope; it is empty for any other id.
 */
export function decodedIdCheck(id: string | undefined): Pick<Envelope, 'idUnusable'> {
  return id?.includes('\ufffd')
    ? {
        idUnusable:
          'it holds U+FFFD: its bytes were not valid UTF-8 (publish ids as UTF-8 text, or pass idOf)',
      }
    : {};
}
