import { AckPolicy, type ConsumerConfig, DeliverPolicy, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { OnceError } from '@once/core';
import { NatsErrorCode } from './errors.js';
import type { ResolvedNatsConsumerOptions } from './options.js';

/** The oldest nats-server once supports: everything used here (nak with a delay, `CONSUMER.CREATE`) is in 2.9. */
export const MIN_SERVER_VERSION = '2.9.0';

/** What the consumer found, checked or created at start. */
export interface Setup {
  stream: string;
  ackWaitMs: number;
  maxAckPending: number;
}

const NS_PER_MS = 1_000_000;

/** True when the server's version is at least `min` (`major.minor.patch`, pre-release tags ignored). */
export function versionAtLeast(version: string | undefined, min: string): boolean {
  const parse = (v: string) => v.split(/[.-]/, 3).map((p) => Number.parseInt(p, 10) || 0);
  if (!version) return false;
  const a = parse(version);
  const b = parse(min);
  for (let i = 0; i < 3; i++) {
    if (a[i]! !== b[i]!) return a[i]! > b[i]!;
  }
  return true;
}

/** True when subject filter `filter` (wildcards `*` and `>`) matches the literal `subject`. */
export function subjectMatches(filter: string, subject: string): boolean {
  const f = filter.split('.');
  const s = subject.split('.');
  for (let i = 0; i < f.length; i++) {
    if (f[i] === '>') return s.length > i;
    if (i >= s.length) return false;
    if (f[i] !== '*' && f[i] !== s[i]) return false;
  }
  return f.length === s.length;
}

/** True for JetStream's "consumer not found" (API error 10014), from any client call. */
function consumerNotFound(err: unknown): boolean {
  const e = err as { code?: unknown; api_error?: { err_code?: number }; message?: unknown };
  return (
    e?.code === 10014 || e?.api_error?.err_code === 10014 || /consumer not found/i.test(String(e?.message))
  );
}

/** True for JetStream's "stream not found". */
export function streamNotFound(err: unknown): boolean {
  return /stream not found/i.test(String((err as Error)?.message));
}

/**
 * Asked after a failed pull: the named OnceError when the durable consumer no longer exists
 * (deleted, or with its stream), so the consumer reports it instead of pulling in vain; undefined
 * when it exists, or when JetStream cannot tell now (the pull failed for another reason).
 */
export async function durableGone(
  jsm: JetStreamManager,
  stream: string,
  o: Pick<ResolvedNatsConsumerOptions, 'durable' | 'createConsumer'>,
): Promise<OnceError | undefined> {
  try {
    await jsm.consumers.info(stream, o.durable);
    return undefined;
  } catch (err) {
    const then = o.createConsumer ? 'once makes it again' : 'create it again (createConsumer is off)';
    if (streamNotFound(err)) {
      return new OnceError(
        NatsErrorCode.StreamNotFound,
        `stream '${stream}' is gone, and durable consumer '${o.durable}' with it: nothing is fetched until a stream captures the subject again and ${then}`,
        { cause: err },
      );
    }
    if (consumerNotFound(err)) {
      return new OnceError(
        NatsErrorCode.ConsumerNotFound,
        `durable consumer '${o.durable}' of stream '${stream}' is gone (deleted): nothing is fetched until ${then}`,
        { cause: err },
      );
    }
    return undefined;
  }
}

/** The stream capturing `subject`, or a named NATS_STREAM_NOT_FOUND. */
async function streamOf(jsm: JetStreamManager, subject: string, field: string): Promise<string> {
  let name: string | undefined;
  try {
    name = await jsm.streams.find(subject);
  } catch {
    name = undefined;
  }
  if (!name) {
    throw new OnceError(
      NatsErrorCode.StreamNotFound,
      `no JetStream stream captures ${field} '${subject}': add the subject to a stream (nats stream add) first`,
    );
  }
  return name;
}

/**
 * Checks the server, finds the stream, checks (or creates) the durable pull consumer and the
 * dead-letter subject. Refuses what would break the guarantee: JetStream stops delivering past
 * `max_deliver` with only an advisory, and naks of messages that never ran count toward it, so
 * only −1 is accepted; acks must be explicit; `ack_wait` must be above `handlerTimeoutMs`.
 */
export async function setUp(
  nc: NatsConnection,
  jsm: JetStreamManager,
  o: ResolvedNatsConsumerOptions,
  handlerTimeoutMs: number,
): Promise<Setup> {
  const version = nc.info?.version;
  if (!versionAtLeast(version, MIN_SERVER_VERSION)) {
    throw new OnceError(
      NatsErrorCode.Server,
      `nats-server ${version ?? '(unknown)'} is older than ${MIN_SERVER_VERSION}, the oldest @once/nats supports`,
    );
  }
  if (nc.info?.jetstream === false) {
    throw new OnceError(
      NatsErrorCode.Server,
      'JetStream is not enabled on the server (start nats-server with -js)',
    );
  }
  const stream = o.stream ?? (await streamOf(jsm, o.subject, 'subject'));
  let info = await jsm.consumers.info(stream, o.durable).catch((err: unknown) => {
    if (consumerNotFound(err)) return undefined;
    if (streamNotFound(err)) {
      throw new OnceError(NatsErrorCode.StreamNotFound, `stream '${stream}' does not exist`, { cause: err });
    }
    throw err;
  });
  const ackWaitMs = o.ackWaitMs ?? handlerTimeoutMs + 10_000;
  if (!info) {
    if (!o.createConsumer) {
      throw new OnceError(
        NatsErrorCode.ConsumerNotFound,
        `durable consumer '${o.durable}' of stream '${stream}' does not exist: create it, or let once (createConsumer: true)`,
      );
    }
    const config: Partial<ConsumerConfig> = {
      durable_name: o.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      max_deliver: -1,
      ack_wait: ackWaitMs * NS_PER_MS,
      max_ack_pending: o.maxAckPending,
      filter_subject: o.subject,
    };
    info = await jsm.consumers.add(stream, config);
  }
  const c = info.config;
  const refuse = (what: string) =>
    new OnceError(
      NatsErrorCode.ConsumerConfig,
      `durable consumer '${o.durable}' of stream '${stream}': ${what}`,
    );
  if (c.deliver_subject) throw refuse('is a push consumer; once needs a pull consumer (no deliver_subject)');
  if (c.ack_policy !== AckPolicy.Explicit) {
    throw refuse(`ack_policy is '${c.ack_policy}'; once acks each message after COMMIT and needs 'explicit'`);
  }
  if (c.max_deliver !== undefined && c.max_deliver !== -1 && c.max_deliver !== 0) {
    throw refuse(
      `max_deliver is ${c.max_deliver}; it must be -1: JetStream stops delivering past it with only an advisory, ` +
        "and naks of messages that never ran count toward it. once's maxAttempts bounds the retries instead",
    );
  }
  const filters = c.filter_subjects ?? (c.filter_subject ? [c.filter_subject] : []);
  if (filters.length !== 1 || filters[0] !== o.subject) {
    throw refuse(
      `filters ${filters.length === 0 ? 'no subject' : `'${filters.join("', '")}'`}, not subject '${o.subject}'`,
    );
  }
  const haveAckWaitMs = Math.round((c.ack_wait ?? 30_000 * NS_PER_MS) / NS_PER_MS);
  if (haveAckWaitMs <= handlerTimeoutMs) {
    throw refuse(
      `ack_wait is ${haveAckWaitMs} ms, not above handlerTimeoutMs (${handlerTimeoutMs} ms): a handler still within its ` +
        'deadline could see its message handed to another consumer. Raise ack_wait or lower handlerTimeoutMs',
    );
  }
  if (o.deadLetterSubject !== false) {
    if (/[*>]/.test(o.deadLetterSubject)) {
      throw new OnceError(
        NatsErrorCode.ConsumerConfig,
        `deadLetterSubject '${o.deadLetterSubject}' holds a wildcard`,
      );
    }
    if (subjectMatches(o.subject, o.deadLetterSubject)) {
      throw new OnceError(
        NatsErrorCode.ConsumerConfig,
        `deadLetterSubject '${o.deadLetterSubject}' is matched by subject '${o.subject}': the consumer would receive its own dead letters`,
      );
    }
    await streamOf(jsm, o.deadLetterSubject, 'deadLetterSubject').catch((err: unknown) => {
      throw new OnceError(
        NatsErrorCode.StreamNotFound,
        `${(err as Error).message}, or pass deadLetterSubject: false to only record failed messages (their inbox rows keep them)`,
      );
    });
  }
  return { stream, ackWaitMs: haveAckWaitMs, maxAckPending: c.max_ack_pending ?? -1 };
}
