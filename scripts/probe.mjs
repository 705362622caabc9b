#!/usr/bin/env node
// Checks that each real service answers its own protocol, not merely that a port is open: a
// Kafka broker listens before it has a controller, RabbitMQ accepts TCP before AMQP is ready.
// Dependency-free on purpose: `scripts/services start` runs before `npm ci` on a fresh clone.
//
//   node scripts/probe.mjs [--wait SECONDS] [--json] [postgres|kafka|sqs|rabbitmq|nats ...]
//
// Urls come from DATABASE_URL, KAFKA_BROKERS, SQS_ENDPOINT, AMQP_URL, NATS_URL (loopback defaults).
// Exit 0 when every probed service answered; one line (or one JSON line) per service.
import net from 'node:net';

const URLS = {
  postgres: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test',
  kafka: process.env.KAFKA_BROKERS || '127.0.0.1:9092',
  sqs: process.env.SQS_ENDPOINT || 'http://127.0.0.1:9324',
  rabbitmq: process.env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672',
  nats: process.env.NATS_URL || 'nats://127.0.0.1:4222',
};
const ATTEMPT_MS = 3000;

/** Opens a socket, writes `request`, resolves with the result of `parse` once it returns non-undefined. */
function exchange(host, port, request, parse) {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    let buf = Buffer.alloc(0);
    const done = (err, value) => {
      socket.destroy();
      clearTimeout(timer);
      err ? reject(err) : resolve(value);
    };
    const timer = setTimeout(() => done(new Error(`no answer within ${ATTEMPT_MS} ms`)), ATTEMPT_MS);
    socket.on('connect', () => socket.write(typeof request === 'function' ? request(socket) : request));
    socket.on('error', (err) => done(err));
    socket.on('close', () => done(new Error('connection closed before an answer')));
    socket.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      try {
        const value = parse(buf, socket);
        if (value !== undefined) done(null, value);
      } catch (err) {
        done(err);
      }
    });
  });
}

// PostgreSQL: a v3 StartupMessage. With trust auth we get AuthenticationOk and run SELECT 1;
// a password request still proves the server is up (credentials are the tests' business).
async function postgres(url) {
  const u = new URL(url);
  const user = decodeURIComponent(u.username || 'postgres');
  const db = decodeURIComponent(u.pathname.slice(1) || user);
  const params = Buffer.from(`user\0${user}\0database\0${db}\0\0`);
  const startup = Buffer.alloc(8);
  startup.writeInt32BE(8 + params.length, 0);
  startup.writeInt32BE(196608, 4); // protocol 3.0
  let queried = false;
  return exchange(u.hostname, Number(u.port || 5432), Buffer.concat([startup, params]), (buf, socket) => {
    for (let at = 0; at + 5 <= buf.length; ) {
      const type = String.fromCharCode(buf[at]);
      const len = buf.readInt32BE(at + 1);
      if (at + 1 + len > buf.length) return undefined;
      const body = buf.subarray(at + 5, at + 1 + len);
      at += 1 + len;
      if (type === 'E') throw new Error(`postgres: ${pgError(body)}`);
      if (type === 'R' && body.readInt32BE(0) !== 0) return 'up (password auth; not verified)';
      if (type === 'Z' && !queried) {
        queried = true;
        const q = Buffer.from('SELECT 1\0');
        const msg = Buffer.alloc(5);
        msg.write('Q');
        msg.writeInt32BE(4 + q.length, 1);
        socket.write(Buffer.concat([msg, q]));
      } else if (type === 'Z') return 'SELECT 1 ok';
    }
    return undefined;
  });
}
const pgError = (body) =>
  Object.fromEntries(
    body
      .toString()
      .split('\0')
      .filter(Boolean)
      .map((f) => [f[0], f.slice(1)]),
  ).M;

// Kafka: Metadata v1 with an empty topic list. A broker only answers it with a live
// controller once it has joined the KRaft quorum, which is what clients need.
async function kafka(brokers) {
  const [host, port] = brokers.split(',')[0].split(':');
  const clientId = Buffer.from('once-probe');
  const req = Buffer.alloc(4 + 2 + 2 + 4 + 2 + clientId.length + 4);
  let o = req.writeInt32BE(req.length - 4, 0);
  o = req.writeInt16BE(3, o); // api_key Metadata
  o = req.writeInt16BE(1, o); // api_version
  o = req.writeInt32BE(1, o); // correlation_id
  o = req.writeInt16BE(clientId.length, o);
  o += clientId.copy(req, o);
  req.writeInt32BE(0, o); // no topics
  return exchange(host, Number(port), req, (buf) => {
    if (buf.length < 4 || buf.length < 4 + buf.readInt32BE(0)) return undefined;
    let at = 8; // size + correlation_id
    const brokerCount = buf.readInt32BE(at);
    at += 4;
    for (let i = 0; i < brokerCount; i++) {
      at += 4; // node_id
      at += 2 + buf.readInt16BE(at); // host
      at += 4; // port
      const rack = buf.readInt16BE(at);
      at += 2 + Math.max(rack, 0);
    }
    const controller = buf.readInt32BE(at);
    if (brokerCount < 1 || controller < 0) throw new Error('kafka: broker has no controller yet');
    return `${brokerCount} broker(s), controller ${controller}`;
  });
}

// SQS (ElasticMQ): ListQueues in the JSON protocol that @aws-sdk/client-sqs 3.x speaks.
async function sqs(endpoint) {
  const res = await fetch(endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': 'AmazonSQS.ListQueues' },
    body: '{}',
    signal: AbortSignal.timeout(ATTEMPT_MS),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`sqs: HTTP ${res.status} ${text.slice(0, 120)}`);
  return `ListQueues ok (${(JSON.parse(text).QueueUrls ?? []).length} queues)`;
}

// RabbitMQ: the AMQP 0-9-1 protocol header must be answered by a Connection.Start method.
async function rabbitmq(url) {
  const u = new URL(url);
  const header = Buffer.from([0x41, 0x4d, 0x51, 0x50, 0, 0, 9, 1]);
  return exchange(u.hostname, Number(u.port || 5672), header, (buf) => {
    if (buf.length < 11) return undefined;
    if (buf[0] !== 1 || buf.readUInt16BE(7) !== 10 || buf.readUInt16BE(9) !== 10) {
      throw new Error('rabbitmq: unexpected answer to the AMQP header');
    }
    return 'AMQP Connection.Start ok';
  });
}

// NATS: the server greets every connection with INFO {json}; JetStream must be on in it.
async function nats(url) {
  const u = new URL(url);
  return exchange(u.hostname, Number(u.port || 4222), Buffer.alloc(0), (buf) => {
    const text = buf.toString('utf8');
    const end = text.indexOf('\r\n');
    if (end < 0) return undefined;
    if (!text.startsWith('INFO ')) throw new Error('nats: unexpected greeting');
    const info = JSON.parse(text.slice(5, end));
    if (info.jetstream !== true)
      throw new Error(`nats: ${info.version} answers but JetStream is off (start it with -js)`);
    return `INFO ok (nats-server ${info.version}, JetStream on)`;
  });
}

const PROBES = { postgres, kafka, sqs, rabbitmq, nats };
// fetch() hides the socket error (ECONNREFUSED) in `cause`.
const describe = (err) => [err?.message, err?.cause?.code ?? err?.cause?.message].filter(Boolean).join(': ');

async function probe(name, deadline) {
  const started = Date.now();
  for (;;) {
    try {
      const detail = await PROBES[name](URLS[name]);
      return { service: name, ok: true, ms: Date.now() - started, url: URLS[name], detail };
    } catch (err) {
      if (Date.now() + 1000 > deadline) {
        return { service: name, ok: false, ms: Date.now() - started, url: URLS[name], detail: describe(err) };
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

let json = false;
let waitS = 0;
const names = [];
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a === '--json') json = true;
  else if (a === '--wait') waitS = Number(process.argv[++i]);
  else names.push(a);
}
const unknown = names.filter((n) => !(n in PROBES));
if (unknown.length) {
  console.error(`probe: unknown service ${unknown.join(', ')} (expected ${Object.keys(PROBES).join(', ')})`);
  process.exit(2);
}
const deadline = Date.now() + waitS * 1000;
const results = await Promise.all(
  (names.length ? names : Object.keys(PROBES)).map((n) => probe(n, deadline)),
);
for (const r of results) {
  console.log(
    json
      ? JSON.stringify(r)
      : `${r.service.padEnd(9)} ${r.ok ? 'up  ' : 'DOWN'} ${`${r.ms} ms`.padStart(8)}  ${r.url}  ${r.detail}`,
  );
}
process.exit(results.every((r) => r.ok) ? 0 : 1);
