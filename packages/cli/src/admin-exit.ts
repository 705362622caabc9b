import { type AdminError, AdminErrorCode } from '@once/core/admin';
import { CliError } from './cli-error.js';
import { escapeText } from './escape-text.js';
import { ExitCode } from './exit-codes.js';
import { quote } from './json-text.js';

/**
 * What the CLI says for core's admin refusals (nothing was changed): not found (or not failed,
 * not done) is exit 5, a
 * retry that needs another flag or cannot republish is exit 2. Codes stay core's, except that an
 * outbox row that is not failed is `NOT_FAILED` like an inbox row. Ids, names and origins are
 * quoted or escaped: they may hold any character (see escape-text.ts).
 */
export function cliErrorOf(err: AdminError): CliError {
  const d = err.detail;
  const schema = err.schema;
  const which = 'messageId' in d ? `message ${quote(d.messageId)} of consumer ${quote(d.consumer)}` : '';
  const cannotRepublish = (why: string) =>
    new CliError(ExitCode.Usage, d.code, `cannot republish ${which}: ${why}. Nothing was changed`, {
      cause: err,
    });
  switch (d.code) {
    case AdminErrorCode.UnknownConsumer:
      return notFound(
        d.code,
        `unknown consumer ${quote(d.consumer)}: it has no rows in schema ${schema} (see \`once status\` for the consumers there are)`,
      );
    case AdminErrorCode.UnknownMessage:
      return notFound(
        d.code,
        `no message ${quote(d.messageId)} for consumer ${quote(d.consumer)} in schema ${schema} (rows are purged once they expire)`,
      );
    case AdminErrorCode.NotFailed:
      return notFound(d.code, `${which} in schema ${schema} is ${d.status}, not failed: nothing to do`);
    case AdminErrorCode.NotDone:
      return notFound(
        d.code,
        d.status === 'failed'
          ? `${which} in schema ${schema} is failed, not done: nothing to forget (\`once failed retry\` deletes a failed record so the next delivery is processed afresh)`
          : `${which} in schema ${schema} is in progress (a lease-mode worker holds it), not done: nothing to forget`,
      );
    case AdminErrorCode.HasSteps: {
      const n = d.steps.length;
      return new CliError(
        ExitCode.Usage,
        d.code,
        `${which} has ${n} recorded step${n === 1 ? '' : 's'} ` +
          `(${d.steps.map(escapeText).join(', ')}); deleting its record deletes them and their effects run again. Nothing was changed. ` +
          'Pass --forget-steps to do it anyway',
        { cause: err },
      );
    }
    case AdminErrorCode.NoBody:
      return cannotRepublish('no body was stored for it');
    case AdminErrorCode.BodyTruncated:
      return cannotRepublish(
        `its stored body was truncated to ${d.bodyBytes} bytes (raise the inbox's failedBodyMaxBytes)`,
      );
    case AdminErrorCode.NoDestination: {
      const origin = d.origin ?? {};
      return cannotRepublish(
        origin.broker === 'rabbitmq'
          ? `it came from RabbitMQ queue ${quote(origin.queue ?? '')}, and a queue is not an exchange: pass --to <exchange> (and --key <routing key> if it differs from ${quote(origin.key ?? '')}), or --to '' --key ${quote(origin.queue ?? '')} for the queue itself through the default exchange`
          : d.origin === null
            ? 'its source was not recorded (it failed before schema version 5): pass --to <destination>'
            : `it came from ${origin.broker === undefined ? 'an unknown broker' : escapeText(origin.broker)} ${quote(origin.queue ?? '')}, which has no default destination: pass --to <destination>`,
      );
    }
    case AdminErrorCode.InsideDedupWindow:
      return cannotRepublish(
        `its consumer takes message ids from the MessageDeduplicationId, which SQS FIFO queue ${JSON.stringify(d.queue)} drops for five minutes after the original was sent: try again at ${d.earliestAt.toISOString()} or later`,
      );
    case AdminErrorCode.UnknownOutboxId:
      return notFound(d.code, `no outbox message ${escapeText(d.id)} in schema ${schema}`);
    case AdminErrorCode.OutboxNotFailed:
      return notFound(
        'NOT_FAILED',
        `outbox message ${escapeText(d.id)} in schema ${schema} is ${d.status}, not failed: nothing to retry`,
      );
  }

  function notFound(code: string, message: string): CliError {
    return new CliError(ExitCode.NotFound, code, message, { cause: err });
  }
}
