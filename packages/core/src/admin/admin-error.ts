import { OnceError } from '../errors.js';
import type { Origin } from '../message/envelope.js';

/** Error codes of the admin API (`@once/core/admin`). */
export const AdminErrorCode = {
  /** The consumer has no inbox rows at all (a typo, most often). */
  UnknownConsumer: 'UNKNOWN_CONSUMER',
  /** The consumer is known, the message id is not (never seen, or purged after it expired). */
  UnknownMessage: 'UNKNOWN_MESSAGE',
  /** The inbox row exists but is not a parked failure: nothing to retry or discard. */
  NotFailed: 'NOT_FAILED',
  /** The inbox row is not `done` (failed, or in progress in lease mode): nothing to forget. */
  NotDone: 'NOT_DONE',
  /** A lease-mode message has recorded steps, whose effects would run again: pass `forgetSteps`. */
  HasSteps: 'HAS_STEPS',
  /** Republish: no body was stored for the failed message. */
  NoBody: 'NO_BODY',
  /** Republish: the stored body was cut at `failedBodyMaxBytes`, so it is not the whole message. */
  BodyTruncated: 'BODY_TRUNCATED',
  /** Republish: no destination was given and none follows from where the message came from. */
  NoDestination: 'NO_DESTINATION',
  /**
   * Republish: the message came from an SQS FIFO queue whose consumer takes ids from the
   * MessageDeduplicationId, which SQS still drops (five minutes after the original was sent):
   * try again at `earliestAt`.
   */
  InsideDedupWindow: 'INSIDE_DEDUP_WINDOW',
  /** No outbox row has this id (its UUID, or the message id it was enqueued with). */
  UnknownOutboxId: 'UNKNOWN_OUTBOX_ID',
  /** The outbox row exists but is not parked as failed: nothing to retry. */
  OutboxNotFailed: 'OUTBOX_NOT_FAILED',
} as const;
/** One of {@link AdminErrorCode}'s values. */
export type AdminErrorCode = (typeof AdminErrorCode)[keyof typeof AdminErrorCode];

/** What an {@link AdminError} is about, by code: the fields a caller needs to say it its own way. */
export type AdminErrorDetail =
  | {
      /** Which refusal this is; the other fields follow from it. */
      code: typeof AdminErrorCode.UnknownConsumer;
      /** The consumer name the operation was asked for. */
      consumer: string;
    }
  | {
      /** Which refusal this is; the other fields follow from it. */
      code: typeof AdminErrorCode.UnknownMessage;
      /** The consumer name the operation was asked for. */
      consumer: string;
      /** The message id the operation was asked for. */
      messageId: string;
    }
  | {
      /** Which refusal this is; the other fields follow from it. */
      code: typeof AdminErrorCode.NotFailed;
      /** The consumer name the operation was asked for. */
      consumer: string;
      /** The message id the operation was asked for. */
      messageId: string;
      /** What the row is instead; `gone` when it vanished between two reads. */
      status: 'done' | 'in_progress' | 'gone';
    }
  | {
      /** Which refusal this is; the other fields follow from it. */
      code: typeof AdminErrorCode.NotDone;
      /** The consumer name the operation was asked for. */
      consumer: string;
      /** The message id the operation was asked for. */
      messageId: string;
      /** What the row is instead. */
      status: 'failed' | 'in_progress';
    }
  | {
      /** Which refusal this is; the other fields follow from it. */
      code: typeof AdminErrorCode.HasSteps;
      /** The consumer name the operation was asked for. */
      consumer: string;
      /** The message id the operation was asked for. */
      messageId: string;
      /** The names of the recorded steps that `forgetSteps` would delete. */
      steps: string[];
    }
  | {
      /** Which refusal this is; the other fields follow from it. */
      code: typeof AdminErrorCode.NoBody;
      /** The consumer name the operation was asked for. */
      consumer: string;
      /** The message id the operation was asked for. */
      messageId: string;
    }
  | {
      /** Which refusal this is; the other fields follow from it. */
      code: typeof AdminErrorCode.BodyTruncated;
      /** The consumer name the operation was asked for. */
      consumer: string;
      /** The message id the operation was asked for. */
      messageId: string;
      /** The size of the body the message had, in bytes, before it was cut to `failedBodyMaxBytes`. */
      bodyBytes: number;
    }
  | {
      /** Which refusal this is; the other fields follow from it. */
      code: typeof AdminErrorCode.NoDestination;
      /** The consumer name the operation was asked for. */
      consumer: string;
      /** The message id the operation was asked for. */
      messageId: string;
      /** Where it came from; null when not recorded (failed before schema version 5). */
      origin: Partial<Origin> | null;
    }
  | {
      /** Which refusal this is; the other fields follow from it. */
      code: typeof AdminErrorCode.InsideDedupWindow;
      /** The consumer name the operation was asked for. */
      consumer: string;
      /** The message id the operation was asked for. */
      messageId: string;
      /** The SQS FIFO queue it came from. */
      queue: string;
      /** The earliest time a republish is taken, by the database's clock. */
      earliestAt: Date;
    }
  | {
      /** Which refusal this is; the other fields follow from it. */
      code: typeof AdminErrorCode.UnknownOutboxId;
      /** The outbox id the operation was asked for (a row UUID or the message id it was enqueued with). */
      id: string;
    }
  | {
      /** Which refusal this is; the other fields follow from it. */
      code: typeof AdminErrorCode.OutboxNotFailed;
      /** The outbox id the operation was asked for (a row UUID or the message id it was enqueued with). */
      id: string;
      /** What the row is instead. */
      status: 'pending' | 'sent';
    };

/**
 * An admin operation that cannot be done as asked; nothing was changed. `detail` carries the
 * typed fields of its code, so the CLI and other callers word it themselves.
 */
export class AdminError extends OnceError {
  /** One of {@link AdminErrorCode}'s values. */
  declare readonly code: AdminErrorCode;
  /** The schema it is about. */
  readonly schema: string;
  /** What the error is about, for programs (the consumer, the id, the schema state). */
  readonly detail: AdminErrorDetail;

  constructor(schema: string, detail: AdminErrorDetail) {
    super(detail.code, `${messageOf(detail)} in schema ${schema}`);
    this.name = 'AdminError';
    this.schema = schema;
    this.detail = detail;
  }

  /** True for an AdminError of any copy of @once/core. */
  static override is(err: unknown): err is AdminError {
    return (
      OnceError.is(err) &&
      typeof (err as { detail?: { code?: unknown } }).detail?.code === 'string' &&
      Object.values(AdminErrorCode).includes(err.code as AdminErrorCode)
    );
  }
}

function messageOf(d: AdminErrorDetail): string {
  const which =
    'messageId' in d
      ? `message ${JSON.stringify(d.messageId)} of consumer ${JSON.stringify(d.consumer)}`
      : '';
  switch (d.code) {
    case AdminErrorCode.UnknownConsumer:
      return `unknown consumer ${JSON.stringify(d.consumer)}: it has no rows`;
    case AdminErrorCode.UnknownMessage:
      return `no ${which}`;
    case AdminErrorCode.NotFailed:
      return `${which} is ${d.status}, not failed: nothing to do`;
    case AdminErrorCode.NotDone:
      return `${which} is ${d.status}, not done: nothing to forget`;
    case AdminErrorCode.HasSteps:
      return `${which} has recorded steps (${d.steps.join(', ')}): deleting them means their effects run again; pass forgetSteps to do it anyway`;
    case AdminErrorCode.NoBody:
      return `cannot republish ${which}: no body was stored for it`;
    case AdminErrorCode.BodyTruncated:
      return `cannot republish ${which}: its stored body was truncated to ${d.bodyBytes} bytes (raise the inbox's failedBodyMaxBytes)`;
    case AdminErrorCode.NoDestination:
      return `cannot republish ${which}: no destination given and none follows from its origin`;
    case AdminErrorCode.InsideDedupWindow:
      return `cannot republish ${which} before ${d.earliestAt.toISOString()}: its consumer takes message ids from the MessageDeduplicationId, and SQS FIFO queue ${d.queue} drops that id for five minutes after the original was sent`;
    case AdminErrorCode.UnknownOutboxId:
      return `no outbox message ${d.id}`;
    case AdminErrorCode.OutboxNotFailed:
      return `outbox message ${d.id} is ${d.status}, not failed: nothing to retry`;
  }
}
