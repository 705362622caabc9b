import { execFileSync, spawn } from 'node:child_process';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error plain JavaScript module of the fault campaign, without declarations
import { DarkGate } from '../../chaos/dark-gate.mjs';
// @ts-expect-error plain JavaScript module of the fault campaign, without declarations
import { NetnsLab, namespaceSupport, removeStale } from '../../chaos/netns.mjs';
// @ts-expect-error plain JavaScript module of the fault campaign, without declarations
import { openPartitions } from '../../chaos/partitions.mjs';

// The fault campaign's network partitions (chaos/netns.mjs): a consumer in a network namespace
// of its own, joined by a veth with link-local addresses, loses its packets to nft drop rules on
// the namespace's end. Checked here on real namespaces: nothing but the run's veths carries the
// addresses, the root namespace gets no rule, a partition is silent (no reset, no error on send)
// and loses nothing once healed, one-way partitions drop one way, TCP keepalive detects a
// namespace partition but not the proxy stand-in (whose kernel keeps answering), and a killed
// run's namespaces are removed at the next start. Without root the campaign falls back to the
// stand-in, which is what this file checks on such a machine.

type Lab = {
  subnet: string;
  hostAddresses: string[];
  hostAddress(slot: string): string;
  wrap(slot: string): string[];
  partition(slot: string, ports: number[], direction: 'both' | 'to-target' | 'to-client'): Promise<void>;
  heal(slot: string): Promise<void>;
  dropping(slot: string): { 'to-client': number[]; 'to-target': number[] };
  redirect(slot: string, from: string, toPort: number): void;
  destroy(): void;
};

const support: { ok: boolean; reason?: string } = namespaceSupport();
const sh = (cmd: string, args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const until = async (cond: () => boolean, ms: number) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`condition not met within ${ms} ms`);
    await pause(20);
  }
};

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** An echo server on `host` that prefixes what it sends back; records what it received. */
async function echoOn(host: string) {
  const got: string[] = [];
  const sockets: net.Socket[] = [];
  const server = net.createServer((s) => {
    sockets.push(s);
    s.on('error', () => {});
    s.on('data', (d) => {
      got.push(d.toString());
      s.write(`<${d.toString()}>`);
    });
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  cleanups.push(
    () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.close(r);
      }),
  );
  return { port: (server.address() as net.AddressInfo).port, got, sockets };
}

/**
 * A client inside the slot's namespace (a child process, as the campaign's consumers are): it
 * connects, writes what it reads on stdin, prints what it receives and any socket event as JSON.
 */
function clientIn(lab: Lab, slot: string, port: number, keepAliveMs?: number, host = lab.hostAddress(slot)) {
  const code = `
    const net = require('node:net');
    const say = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
    const c = net.connect(${port}, '${host}', () => {
      ${keepAliveMs ? `c.setKeepAlive(true, ${keepAliveMs});` : ''}
      say({ t: 'connected' });
    });
    c.on('data', (d) => say({ t: 'data', d: d.toString() }));
    c.on('error', (e) => say({ t: 'error', code: e.code }));
    c.on('close', () => { say({ t: 'close' }); process.exit(0); });
    process.stdin.on('data', (d) => c.write(d.toString().trim()));
  `;
  const [cmd, ...args] = [...lab.wrap(slot), process.execPath, '-e', code];
  const child = spawn(cmd!, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const events: { t: string; d?: string; code?: string }[] = [];
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d.toString();
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      events.push(JSON.parse(buf.slice(0, i)));
      buf = buf.slice(i + 1);
    }
  });
  cleanups.push(() => child.kill('SIGKILL'));
  return {
    pid: child.pid,
    events,
    data: () =>
      events
        .filter((e) => e.t === 'data')
        .map((e) => e.d)
        .join(''),
    send: (s: string) => child.stdin.write(`${s}\n`),
  };
}

// One of the two blocks is defined, never both: which one depends on the machine, and a run says
// which in its test names.
const onRoot = () => {
  // Stateless (-s): the rules without their counters, which other programs' traffic moves (a
  // dockerd left from an earlier run counts every local packet in its nat table).
  const rootRules = () => sh('nft', ['-s', 'list', 'ruleset']);

  it('puts each slot in a namespace of its own, with the addresses on its veths only and no rule in root', () => {
    const before = rootRules();
    const lab: Lab = NetnsLab.create(['a', 'b']);
    cleanups.push(() => lab.destroy());
    const [a, b] = [lab.hostAddress('a'), lab.hostAddress('b')];
    expect(a).toMatch(/^169\.254\.\d+\.1$/);
    expect(b).toMatch(/^169\.254\.\d+\.5$/);
    // In root, the run's subnet is on its own veths and nowhere else.
    const prefix = lab.subnet.replace(/0\/24$/, '');
    const holders = (
      JSON.parse(sh('ip', ['-j', '-4', 'addr', 'show'])) as {
        ifname: string;
        addr_info: { local: string }[];
      }[]
    )
      .flatMap((l) => l.addr_info.map((x) => ({ dev: l.ifname, addr: x.local })))
      .filter((x) => x.addr.startsWith(prefix));
    expect(holders.map((h) => h.addr).sort()).toEqual([a, b].sort());
    for (const h of holders) expect(h.dev).toMatch(/^onc[0-9a-z]+h\d$/);
    // Inside: loopback and the namespace's end, and no route out.
    const inside = sh(lab.wrap('a')[0]!, [...lab.wrap('a').slice(1), 'ip', '-4', '-br', 'addr']);
    expect(inside).toMatch(/^lo\s+UNKNOWN\s+127\.0\.0\.1\/8/m);
    expect(inside.trim().split('\n')).toHaveLength(2);
    expect(sh(lab.wrap('a')[0]!, [...lab.wrap('a').slice(1), 'ip', 'route'])).not.toMatch(/default/);
    expect(rootRules()).toBe(before);
    lab.destroy();
    expect(sh('ip', ['netns', 'list'])).not.toContain(`oncechaos-${process.pid}-`);
    expect(sh('ip', ['-br', 'link'])).not.toMatch(new RegExp(`^onc${process.pid.toString(36)}`, 'm'));
  });

  it('drops silently both ways and loses nothing once healed; the root namespace never gets a rule', async () => {
    const before = rootRules();
    const lab: Lab = NetnsLab.create(['a']);
    cleanups.push(() => lab.destroy());
    const echo = await echoOn(lab.hostAddress('a'));
    const c = clientIn(lab, 'a', echo.port);
    await until(() => c.events.some((e) => e.t === 'connected'), 10_000);
    c.send('1');
    await until(() => c.data() === '<1>', 5_000);

    await lab.partition('a', [echo.port], 'both');
    expect(lab.dropping('a')).toEqual({ 'to-client': [echo.port], 'to-target': [echo.port] });
    expect(rootRules()).toBe(before);
    c.send('2');
    await pause(1_500);
    expect(echo.got.join('')).toBe('1');
    expect(c.data()).toBe('<1>');
    // Silent: no reset, no error on the client's side.
    expect(c.events.filter((e) => e.t !== 'connected' && e.t !== 'data')).toEqual([]);

    await lab.heal('a');
    // TCP resends on its backed-off timer: the byte arrives within seconds of the heal.
    await until(() => c.data() === '<1><2>', 15_000);
    expect(echo.got.join('')).toBe('12');
    expect(rootRules()).toBe(before);
  });

  it('one way: to-target drops only the client’s packets, to-client only the server’s', async () => {
    const lab: Lab = NetnsLab.create(['a']);
    cleanups.push(() => lab.destroy());
    const echo = await echoOn(lab.hostAddress('a'));
    const c = clientIn(lab, 'a', echo.port);
    await until(() => c.events.some((e) => e.t === 'connected') && echo.sockets.length === 1, 10_000);

    await lab.partition('a', [echo.port], 'to-target');
    echo.sockets[0]!.write('s');
    await until(() => c.data() === 's', 5_000);
    c.send('o');
    await pause(1_000);
    expect(echo.got).toEqual([]);
    await lab.heal('a');
    await until(() => c.data() === 's<o>', 15_000);

    await lab.partition('a', [echo.port], 'to-client');
    c.send('i');
    await until(() => echo.got.join('') === 'oi', 5_000);
    await pause(1_000);
    expect(c.data()).toBe('s<o>');
    await lab.heal('a');
    await until(() => c.data() === 's<o><i>', 15_000);
  });

  it('redirects a loopback address inside the slot to its root end, where the slot’s drops still hold it', async () => {
    // How a Kafka client without a socket hook is cut: it connects where the broker's metadata
    // says (127.0.0.1:<port>), which inside the slot means the slot's fault proxy.
    const before = rootRules();
    const lab: Lab = NetnsLab.create(['a', 'b']);
    cleanups.push(() => lab.destroy());
    const echo = await echoOn(lab.hostAddress('a'));
    lab.redirect('a', '127.0.0.1:9', echo.port);
    // Only what is asked is rewritten, only in that slot, never in root.
    expect(() => lab.redirect('a', 'nowhere.invalid:9', echo.port)).toThrow(/loopback host:port/);
    expect(rootRules()).toBe(before);
    const c = clientIn(lab, 'a', 9, undefined, '127.0.0.1');
    await until(() => c.events.some((e) => e.t === 'connected'), 10_000);
    c.send('r');
    await until(() => c.data() === '<r>', 5_000);
    expect(echo.sockets[0]!.remoteAddress).not.toBe('127.0.0.1');

    await lab.partition('a', [echo.port], 'both');
    c.send('s');
    await pause(1_000);
    expect(echo.got.join('')).toBe('r');
    await lab.heal('a');
    await until(() => c.data() === '<r><s>', 15_000);

    // Slot b has no redirect: 127.0.0.1:9 is its own loopback, where nothing listens.
    const other = clientIn(lab, 'b', 9, undefined, '127.0.0.1');
    await until(() => other.events.some((e) => e.t === 'error'), 10_000);
    expect(other.events.find((e) => e.t === 'error')?.code).toBe('ECONNREFUSED');
    expect(rootRules()).toBe(before);
  });

  it('lets TCP keepalive see a namespace partition, which the proxy stand-in hides', async () => {
    const lab: Lab = NetnsLab.create(['a']);
    cleanups.push(() => lab.destroy());
    // The namespace side: a client with keepalive (probes after 1 s idle) to a server on its veth.
    const echo = await echoOn(lab.hostAddress('a'));
    const c = clientIn(lab, 'a', echo.port, 1_000);
    await until(() => c.events.some((e) => e.t === 'connected'), 10_000);
    await lab.partition('a', [echo.port], 'both');

    // The stand-in side, in the root namespace: the same client through a dark gate.
    const loop = await echoOn('127.0.0.1');
    const gate = await DarkGate.start({ host: '127.0.0.1', port: loop.port });
    cleanups.push(() => gate.close());
    const viaGate = net.connect(gate.port, '127.0.0.1');
    const gateEvents: string[] = [];
    viaGate.on('error', (e: NodeJS.ErrnoException) => gateEvents.push(e.code ?? 'error'));
    viaGate.on('close', () => gateEvents.push('close'));
    await new Promise((r) => viaGate.once('connect', r));
    viaGate.setKeepAlive(true, 1_000);
    cleanups.push(() => viaGate.destroy());
    gate.dark('both');

    // Keepalive probes start after 1 s idle; the kernel gives up after its probe count.
    await until(() => c.events.some((e) => e.t === 'error'), 60_000);
    expect(c.events.find((e) => e.t === 'error')?.code).toBe('ETIMEDOUT');
    expect(gateEvents).toEqual([]);
  });

  it('removes the namespaces and veths of a run that was killed, and the processes left in them', async () => {
    // A run in a child process makes its namespaces, starts a process inside one, and is killed.
    const netnsUrl = new URL('../../chaos/netns.mjs', import.meta.url).href;
    const code = `
      import(${JSON.stringify(netnsUrl)}).then(({ NetnsLab }) => {
        const lab = NetnsLab.create(['a', 'b']);
        const { spawn } = require('node:child_process');
        const [cmd, ...args] = [...lab.wrap('a'), 'sleep', '600'];
        const orphan = spawn(cmd, args, { detached: true, stdio: 'ignore' });
        orphan.unref();
        console.log(JSON.stringify({ orphan: orphan.pid }));
      });
    `;
    const run = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    cleanups.push(() => run.kill('SIGKILL'));
    const line = await new Promise<string>((r) => run.stdout.once('data', (d) => r(d.toString())));
    const { orphan } = JSON.parse(line) as { orphan: number };
    cleanups.push(() => {
      try {
        process.kill(orphan, 'SIGKILL');
      } catch {
        /* removed, as it should be */
      }
    });
    const prefix = `oncechaos-${run.pid}-`;
    expect(sh('ip', ['netns', 'list'])).toContain(prefix);
    // A live run's namespaces are left alone.
    expect((removeStale() as string[]).filter((n) => n.startsWith(prefix))).toEqual([]);
    expect(sh('ip', ['netns', 'list'])).toContain(prefix);
    run.kill('SIGKILL');
    await new Promise((r) => run.once('exit', r));

    const removed: string[] = removeStale();
    expect(removed.filter((n) => n.startsWith(prefix)).sort()).toEqual([
      `${prefix}0`,
      `${prefix}1`,
      `${prefix}w`,
    ]);
    expect(sh('ip', ['netns', 'list'])).not.toContain(prefix);
    expect(sh('ip', ['-br', 'link'])).not.toMatch(new RegExp(`^onc${run.pid!.toString(36)}[hn]`, 'm'));
    await until(() => {
      try {
        process.kill(orphan, 0);
        return false;
      } catch {
        return true;
      }
    }, 5_000);
  });
};

const withoutRoot = () => {
  it('says why, and partitions through dark gates', async () => {
    expect(support.reason).toBeTruthy();
    const partitions = await openPartitions({ slots: ['a'], mode: 'auto' });
    cleanups.push(() => partitions.close());
    expect(partitions.via).toBe('proxy');
    expect(partitions.why).toBe(support.reason);
    expect(partitions.wrap('a')).toEqual([]);
    const echo = await echoOn('127.0.0.1');
    const ep = await partitions.route('a', { pgPort: echo.port, brokerPort: echo.port });
    const [host, port] = ep.pg.split(':');
    const s = net.connect(Number(port), host);
    s.on('error', () => {});
    cleanups.push(() => s.destroy());
    let got = '';
    s.on('data', (d) => {
      got += d.toString();
    });
    await partitions.cut('a', 'pg', 'both');
    s.write('x');
    await pause(300);
    expect(got).toBe('');
    await partitions.heal('a');
    await until(() => got === '<x>', 5_000);
  });
};

if (support.ok) describe('namespace partitions (root)', onRoot);
else describe(`partitions without namespaces: the stand-in (${support.reason})`, withoutRoot);
