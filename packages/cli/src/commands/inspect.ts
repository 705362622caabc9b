import { getInboxRow, type InboxRecord, readSteps, type StepRecord } from '@once/core/admin';
import type { Database } from '../database.js';
import { requireSchema } from '../database.js';
import { escapeText, showName } from '../escape-text.js';
import { formatBytes, formatTable, formatTime, hex, oneLine, previewBody } from '../format.js';
import type { Report } from '../report.js';

/** Options of `once inspect`. */
export interface InspectOptions {
  /** How much of the body to preview, in bytes. @default 200 */
  readonly bodyBytes: number;
}

/**
 * `once inspect <consumer> <id>`: one inbox row. `done` rows carry the stored result; `failed`
 * rows the error and the body; a `done` row with an error is a failure discarded by an operator.
 * JSON output carries the whole stored body in base64.
 */
export async function inspectCommand(
  db: Database,
  consumer: string,
  id: string,
  options: InspectOptions,
): Promise<Report> {
  await requireSchema(db);
  const key = { consumer, messageId: id };
  // Decoded by core (jsonb columns go through its codec); unknown consumer or id throw (exit 5).
  const row = await getInboxRow(db.pool, db.schema, key);
  const steps = await readSteps(db.pool, db.schema, key);
  const discarded = row.status === 'done' && row.error !== null;
  const preview = row.body ? previewBody(row.body, options.bodyBytes) : null;
  const data = {
    schema: db.schema,
    consumer: row.consumer,
    messageId: row.messageId,
    status: row.status,
    discarded,
    fingerprint: hex(row.fingerprint),
    attempts: row.attempts,
    createdAt: row.createdAt,
    expiresAt: row.expiresAt,
    ...(row.owner === undefined ? {} : { owner: row.owner, leaseUntil: row.leaseUntil ?? null }),
    result: row.result,
    error: row.error,
    origin: row.origin ?? null,
    ...(row.response
      ? {
          response: {
            status: row.response.status,
            headers: row.response.headers,
            bytes: row.response.body.length,
            base64: row.response.body.toString('base64'),
          },
        }
      : {}),
    body:
      row.body === null || preview === null
        ? null
        : {
            bytes: row.body.length,
            truncated: row.bodyTruncated,
            encoding: preview.encoding,
            preview: preview.text,
            base64: row.body.toString('base64'),
          },
    steps: steps.map((st) => ({
      step: st.step,
      seq: st.seq,
      attempt: st.attempt,
      result: st.result,
      recordedAt: st.recordedAt,
    })),
  };
  return { data, text: inspectText(row, discarded, preview, steps) };
}

function inspectText(
  row: InboxRecord,
  discarded: boolean,
  preview: ReturnType<typeof previewBody> | null,
  steps: readonly StepRecord[],
): string {
  const fields: [string, string][] = [
    ['consumer', showName(row.consumer)],
    ['message id', showName(row.messageId)],
    ['status', discarded ? 'done (a failure discarded by `once failed discard`)' : row.status],
    ['fingerprint', `sha256:${hex(row.fingerprint)}`],
    ['attempts', String(row.attempts)],
    ['created', formatTime(row.createdAt)],
    ['expires', formatTime(row.expiresAt)],
    ...(row.status === 'in_progress'
      ? ([
          [
            'lease owner',
            row.owner === undefined || row.owner === null
              ? '- (released: the next delivery takes it over)'
              : showName(row.owner),
          ],
          ['lease until', formatTime(row.leaseUntil)],
        ] as [string, string][])
      : []),
    ['result', oneLine(row.result, 200)],
    ['error', errorLine(row.error)],
    ...(row.origin ? ([['origin', oneLine(row.origin, 200)]] as [string, string][]) : []),
    ...(row.response
      ? ([
          [
            'http response',
            `${row.response.status}, ${row.response.headers.length} headers, ${formatBytes(row.response.body.length)}: ${previewBody(row.response.body, 120).text}`,
          ],
        ] as [string, string][])
      : []),
  ];
  if (row.body === null || preview === null) {
    fields.push([
      'body',
      row.status === 'failed' ? 'not stored' : '- (bodies are kept for failed rows only)',
    ]);
  } else {
    const size = `${formatBytes(row.body.length)}${row.bodyTruncated ? ', truncated when stored' : ''}`;
    fields.push(['body', `${size}, ${preview.encoding}: ${preview.text}${preview.cut ? '…' : ''}`]);
  }
  const lines = formatTable(['field', 'value'], fields).split('\n').slice(1);
  if (steps.length > 0) {
    lines.push(
      '',
      'recorded steps:',
      ...formatTable(
        ['seq', 'step', 'attempt', 'recorded', 'result'],
        steps.map((st) => [
          String(st.seq),
          showName(st.step),
          String(st.attempt),
          formatTime(st.recordedAt),
          oneLine(st.result),
        ]),
      )
        .split('\n')
        .map((l) => `  ${l}`),
    );
  }
  const stack = stackOf(row.error);
  if (stack) lines.push('', 'error stack:', ...stack.split('\n').map((l) => `  ${escapeText(l)}`));
  return lines.join('\n');
}

/** `Name: message (CODE)` of a stored error (core's SerializedError), or `-`. */
export function errorLine(error: unknown): string {
  if (error === null || error === undefined) return '-';
  if (typeof error !== 'object') return oneLine(error, 200);
  const e = error as { name?: unknown; message?: unknown; code?: unknown };
  const name = typeof e.name === 'string' ? e.name : 'Error';
  const message = typeof e.message === 'string' ? e.message : oneLine(error, 200);
  return `${name}: ${message}${typeof e.code === 'string' ? ` (${e.code})` : ''}`;
}

function stackOf(error: unknown): string | undefined {
  const stack =
    typeof error === 'object' && error !== null ? (error as { stack?: unknown }).stack : undefined;
  return typeof stack === 'string' ? stack : undefined;
}
