import { type Readable, Transform } from 'node:stream';

/**
 * A pass-through for a Fastify `preParsing` hook that keeps a copy of every chunk of the request
 * body on its way to the content-type parser, so the fingerprint hashes the bytes the client sent
 * while the application's own parsers (JSON, forms, ...) still parse them. Fastify's `bodyLimit`
 * still applies: the parser counts the chunks as they pass, and stops the stream past the limit.
 */
export class FastifyBodyTap extends Transform {
  readonly #chunks: Buffer[] = [];
  #length = 0;

  override _transform(
    chunk: Buffer | string,
    _encoding: BufferEncoding,
    done: (err?: Error | null, data?: unknown) => void,
  ): void {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.#chunks.push(bytes);
    this.#length += bytes.length;
    done(null, bytes);
  }

  /** The bytes that passed so far: all of them once the body was parsed. */
  bytes(): Uint8Array {
    return this.#chunks.length === 1
      ? (this.#chunks[0] as Buffer)
      : Buffer.concat(this.#chunks, this.#length);
  }
}

/** Pipes `payload` through a new tap, carrying an error of the source to the tap. */
export function tapBody(payload: Readable): FastifyBodyTap {
  const tap = new FastifyBodyTap();
  payload.on('error', (err: Error) => tap.destroy(err));
  // The content-type parser may stop reading (body too large); stop the source with it.
  tap.on('close', () => {
    if (!tap.readableEnded) payload.unpipe(tap);
  });
  payload.pipe(tap);
  return tap;
}
