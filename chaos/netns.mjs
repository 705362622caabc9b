// Network namespaces for the campaign's consumer children, so that a partition is a real loss of
// packets in the network (Jepsen-style) and not a proxy that stops forwarding: a proxy's kernel
// keeps ACKing and answering keepalives, a lost packet does not.
//
// A run makes one "wire" namespace `oncechaos-<pid>-w` and, per slot (a consumer child), a
// namespace `oncechaos-<pid>-<slot>`. The root namespace and the slot's namespace are joined
// through the wire namespace: a veth `onc<pid36>h<slot>` (root end, 169.254.<X>.<4·slot+1>/30) to
// `up<slot>` in the wire, a bridge `br<slot>` there, and a veth `dn<slot>` to `eth0` in the slot's
// namespace (169.254.<X>.<4·slot+2>/30). Nothing routes anywhere else: a child reaches only
// listeners bound on its root-end address (the run's PostgreSQL, the slot's fault proxy), and its
// own loopback, where nothing listens.
//
// Partitions are nft drop rules at the wire's ingress (netdev hooks on `up<slot>` and `dn<slot>`):
// never in the root namespace, which carries the shared services, and never in the consumer's own
// stack either. A packet dropped at the sender's own egress is reported back to TCP as local
// congestion: it is retried every 500 ms without back-off, never counted toward a timeout, and a
// keepalive probe dropped there does not count as lost. Dropped in the wire, it left the sender and
// vanished, as on a real network. A killed run's namespaces and veths are found by their names
// (the pid is in them) and removed at the next start.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';

const NETNS_PREFIX = 'oncechaos-';
const VETH_PREFIX = 'onc';
const NFT_TABLE = 'oncechaos';
/** Third octets of 169.254.X.0/24 the campaign may take: clear of 169.254.169.254 and of 0/255. */
const OCTETS = Array.from({ length: 50 }, (_, i) => 200 + i);
/** Which way a partition drops, in the fault proxy's words: the target is PostgreSQL or the broker, the client the consumer. */
export const DIRECTIONS = Object.freeze(['both', 'to-target', 'to-client']);

const sh = (cmd, args, input) =>
  execFileSync(cmd, args, { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'], input });
const inNs = (ns, cmd, args, input) => sh('ip', ['netns', 'exec', ns, cmd, ...args], input);
/** `ip -n`: a namespace's links and addresses without `ip netns exec` (faster: no mount namespace). */
const ipIn = (ns, args) => sh('ip', ['-n', ns, ...args]);

/** True if a command runs (exit 0). */
function runs(cmd, args) {
  try {
    sh(cmd, args);
    return true;
  } catch {
    return false;
  }
}

/**
 * The process that made a namespace still runs. Any live process counts (a test may make them,
 * not only campaign.mjs): a reused pid only keeps a stale namespace until a later start.
 */
function ownerAlive(pid) {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/**
 * Whether namespace partitions can run here: root, `ip`, `nft` (installed with apt-get when root
 * and missing), and a namespace with a bridge and netdev ingress rules can be made.
 * `{ ok: true }` or `{ ok: false, reason }`.
 */
export function namespaceSupport(log = () => {}) {
  if (process.getuid?.() !== 0) return { ok: false, reason: 'not root' };
  if (!runs('ip', ['-V'])) return { ok: false, reason: "no 'ip' command (iproute2)" };
  if (!runs('nft', ['--version'])) {
    if (!runs('apt-get', ['--version'])) return { ok: false, reason: "no 'nft' and no apt-get" };
    log("nft missing: installing Debian's nftables (apt-get install -y nftables)");
    try {
      execFileSync('apt-get', ['install', '-y', '-q', 'nftables'], {
        stdio: 'ignore',
        env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
        timeout: 300_000,
      });
    } catch (err) {
      return { ok: false, reason: `apt-get install nftables failed (${err.message.split('\n')[0]})` };
    }
    if (!runs('nft', ['--version'])) return { ok: false, reason: 'nft still missing after apt-get' };
  }
  const probe = `${NETNS_PREFIX}${process.pid}-probe`;
  try {
    sh('ip', ['netns', 'add', probe]);
    ipIn(probe, ['link', 'add', 'br0', 'type', 'bridge']);
    ipIn(probe, ['link', 'add', 'up0', 'type', 'veth', 'peer', 'name', 'dn0']);
    inNs(probe, 'nft', ['-f', '-'], wireTable([{ index: 0, hostAddr: '169.254.0.1' }]));
    return { ok: true };
  } catch (err) {
    return {
      ok: false,
      reason: `cannot make a namespace with a bridge and nft rules (${String(err.stderr ?? err.message).trim()})`,
    };
  } finally {
    runs('ip', ['netns', 'del', probe]);
  }
}

function nsPids(ns) {
  try {
    return sh('ip', ['netns', 'pids', ns]).split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function killIn(ns) {
  for (const p of nsPids(ns)) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

/**
 * Removes namespaces and root-end veths of campaign runs that are gone (killed before their
 * cleanup ran), and SIGKILLs what still runs inside such a namespace (a killed run's consumer
 * children). Returns the names it removed.
 */
export function removeStale(log = () => {}) {
  const removed = [];
  let names = [];
  try {
    names = sh('ip', ['netns', 'list'])
      .split('\n')
      .map((l) => l.split(' ')[0])
      .filter((n) => n.startsWith(NETNS_PREFIX));
  } catch {
    return removed;
  }
  for (const ns of names) {
    const pid = Number(ns.slice(NETNS_PREFIX.length).split('-')[0]);
    if (Number.isInteger(pid) && ownerAlive(pid)) continue;
    killIn(ns);
    if (runs('ip', ['netns', 'del', ns])) removed.push(ns);
  }
  // Deleting the wire namespace takes the root ends with it; one left over (the run died while
  // making it) is found by name.
  let links = [];
  try {
    links = JSON.parse(sh('ip', ['-j', 'link', 'show', 'type', 'veth']));
  } catch {
    /* no veth at all */
  }
  for (const l of links) {
    const m = /^onc([0-9a-z]+)h\d$/.exec(l.ifname ?? '');
    if (!m || ownerAlive(Number.parseInt(m[1], 36))) continue;
    if (runs('ip', ['link', 'del', l.ifname])) removed.push(l.ifname);
  }
  if (removed.length) log(`removed what a killed run left: ${removed.join(', ')}`);
  return removed;
}

/**
 * The wire namespace's table for its whole life. Per slot: TCP from the root end with a source
 * port in `in<i>` is dropped as it enters the wire from root (`up<i>`), TCP to the root end with a
 * destination port in `out<i>` as it enters from the slot (`dn<i>`). The sets start empty; a
 * partition adds ports, a heal flushes them.
 */
function wireTable(slots) {
  const lines = [`table netdev ${NFT_TABLE} {`];
  for (const { index: i, hostAddr } of slots) {
    lines.push(
      `  set in${i} { type inet_service; }`,
      `  set out${i} { type inet_service; }`,
      `  chain inbound${i} {`,
      `    type filter hook ingress device "up${i}" priority 0; policy accept;`,
      `    ip saddr ${hostAddr} tcp sport @in${i} drop`,
      '  }',
      `  chain outbound${i} {`,
      `    type filter hook ingress device "dn${i}" priority 0; policy accept;`,
      `    ip daddr ${hostAddr} tcp dport @out${i} drop`,
      '  }',
    );
  }
  lines.push('}', '');
  return lines.join('\n');
}

/**
 * A long-lived `nft -i` in the wire namespace: a partition begins a few milliseconds after it is
 * asked for, not the 40-60 ms (more under load) that starting `ip netns exec nft` takes, which is
 * longer than a Kafka message stays between claim and settle. Each operation is followed by a
 * listing whose closing brace says that nft has applied it; anything on stderr fails it.
 */
class Firewall {
  #proc;
  #queue = [];
  #stderr = '';

  constructor(netns) {
    this.#proc = spawn('ip', ['netns', 'exec', netns, 'nft', '-i'], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.#proc.stdin.on('error', () => {});
    this.#proc.stderr.on('data', (d) => {
      this.#stderr += d.toString();
    });
    createInterface({ input: this.#proc.stdout }).on('line', (line) => {
      // Listings end with the table's closing brace alone on a line: one per operation.
      if (line !== '}') return;
      const op = this.#queue.shift();
      if (!op) return;
      const err = this.#stderr.trim();
      this.#stderr = '';
      if (err) op.reject(new Error(`nft: ${err}`));
      else op.resolve();
    });
    this.#proc.once('exit', (code) => {
      for (const op of this.#queue.splice(0))
        op.reject(new Error(`nft -i exited ${code}: ${this.#stderr.trim()}`));
    });
    // A first listing of the whole table fills nft's cache: without it, `nft -i` (1.0.6) does not
    // find the sets a later command names.
    this.ready = this.#send([`list table netdev ${NFT_TABLE}`]);
    this.ready.catch(() => {});
  }

  /** Runs nft commands, one per line; resolves once they are applied. */
  async run(commands) {
    await this.ready;
    return this.#send([...commands, `list set netdev ${NFT_TABLE} in0`]);
  }

  /** `lines` must end with a listing of something in the table (one closing brace). */
  #send(lines) {
    return new Promise((resolve, reject) => {
      this.#queue.push({ resolve, reject });
      this.#proc.stdin.write(`${lines.join('\n')}\n`);
    });
  }

  close() {
    this.#proc.stdin.end();
    if (this.#proc.exitCode === null) this.#proc.kill('SIGKILL');
  }
}

/** Every IPv4 address in a namespace (root when `ns` is undefined), `{ dev, addr }`. */
function addresses(ns) {
  const out = ns ? ipIn(ns, ['-j', '-4', 'addr', 'show']) : sh('ip', ['-j', '-4', 'addr', 'show']);
  return JSON.parse(out).flatMap((l) => (l.addr_info ?? []).map((a) => ({ dev: l.ifname, addr: a.local })));
}

/** Namespaces for a run's slots; `partition()` / `heal()` one slot; `destroy()` (synchronous). */
export class NetnsLab {
  /** slot name -> { index, netns, hostDev, hostAddr, nsAddr, cut } */
  #slots = new Map();
  #octet;
  #wire = `${NETNS_PREFIX}${process.pid}-w`;
  #firewall;
  #destroyed = false;

  constructor(octet) {
    this.#octet = octet;
  }

  /** The /24 the run's veths use, e.g. `169.254.200.0/24`. */
  get subnet() {
    return `169.254.${this.#octet}.0/24`;
  }

  /** Makes a namespace per slot name (at most 10). Throws, having removed what it made, on failure. */
  static create(slotNames) {
    if (slotNames.length > 10) throw new RangeError(`at most 10 slots, got ${slotNames.length}`);
    const used = new Set(
      addresses()
        .filter((a) => a.addr.startsWith('169.254.'))
        .map((a) => Number(a.addr.split('.')[2])),
    );
    const octet = OCTETS.find((o) => !used.has(o));
    if (octet === undefined) throw new Error('no free 169.254.X.0/24 for the campaign veths');
    const lab = new NetnsLab(octet);
    try {
      sh('ip', ['netns', 'add', lab.#wire]);
      for (const [index, name] of slotNames.entries()) lab.#add(name, index);
      inNs(lab.#wire, 'nft', ['-f', '-'], wireTable([...lab.#slots.values()]));
      lab.#firewall = new Firewall(lab.#wire);
      lab.#verify();
    } catch (err) {
      lab.destroy();
      throw err;
    }
    return lab;
  }

  #add(name, i) {
    const w = this.#wire;
    const s = {
      index: i,
      netns: `${NETNS_PREFIX}${process.pid}-${i}`,
      hostDev: `${VETH_PREFIX}${process.pid.toString(36)}h${i}`,
      hostAddr: `169.254.${this.#octet}.${4 * i + 1}`,
      nsAddr: `169.254.${this.#octet}.${4 * i + 2}`,
      cut: undefined,
    };
    this.#slots.set(name, s);
    sh('ip', ['netns', 'add', s.netns]);
    // Root end to the wire: the peer is made in the wire namespace, never named in root.
    sh('ip', ['link', 'add', s.hostDev, 'type', 'veth', 'peer', 'name', `up${i}`, 'netns', w]);
    ipIn(w, ['link', 'add', `dn${i}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', s.netns]);
    ipIn(w, ['link', 'add', `br${i}`, 'type', 'bridge']);
    // No IPv6 anywhere on these links: nothing but the /30 below ever travels on them.
    sh('ip', ['link', 'set', s.hostDev, 'addrgenmode', 'none']);
    for (const dev of [`up${i}`, `dn${i}`, `br${i}`]) ipIn(w, ['link', 'set', dev, 'addrgenmode', 'none']);
    ipIn(s.netns, ['link', 'set', 'eth0', 'addrgenmode', 'none']);
    for (const dev of [`up${i}`, `dn${i}`]) ipIn(w, ['link', 'set', dev, 'master', `br${i}`]);
    for (const dev of [`up${i}`, `dn${i}`, `br${i}`]) ipIn(w, ['link', 'set', dev, 'up']);
    sh('ip', ['addr', 'add', `${s.hostAddr}/30`, 'dev', s.hostDev]);
    sh('ip', ['link', 'set', s.hostDev, 'up']);
    ipIn(s.netns, ['link', 'set', 'lo', 'up']);
    ipIn(s.netns, ['addr', 'add', `${s.nsAddr}/30`, 'dev', 'eth0']);
    ipIn(s.netns, ['link', 'set', 'eth0', 'up']);
  }

  /** The run's link-local addresses are on its own links and nowhere else; no way out anywhere. */
  #verify() {
    const mine = new Map([...this.#slots.values()].map((s) => [s.hostAddr, s.hostDev]));
    const prefix = `169.254.${this.#octet}.`;
    for (const a of addresses()) {
      if (a.addr.startsWith(prefix) && mine.get(a.addr) !== a.dev)
        throw new Error(`${a.addr} is on ${a.dev}, not on one of this run's veths`);
    }
    if (addresses(this.#wire).length > 0) throw new Error(`the wire namespace ${this.#wire} holds addresses`);
    for (const s of this.#slots.values()) {
      const inside = addresses(s.netns);
      const wanted = [
        { dev: 'lo', addr: '127.0.0.1' },
        { dev: 'eth0', addr: s.nsAddr },
      ];
      if (JSON.stringify(inside) !== JSON.stringify(wanted))
        throw new Error(`namespace ${s.netns} holds ${JSON.stringify(inside)}`);
      const routes = JSON.parse(ipIn(s.netns, ['-j', '-4', 'route', 'show']));
      if (routes.some((r) => r.dst === 'default'))
        throw new Error(`namespace ${s.netns} has a default route`);
    }
  }

  #slot(name) {
    const s = this.#slots.get(name);
    if (!s) throw new Error(`no namespace for slot '${name}'`);
    return s;
  }

  /** The root-end address: what a slot's children connect to, and where its listeners bind. */
  hostAddress(name) {
    return this.#slot(name).hostAddr;
  }

  /** Every root-end address (PostgreSQL listens on all of them). */
  get hostAddresses() {
    return [...this.#slots.values()].map((s) => s.hostAddr);
  }

  /** Command prefix that runs a program inside the slot's namespace. */
  wrap(name) {
    return ['ip', 'netns', 'exec', this.#slot(name).netns];
  }

  /**
   * Drops TCP between the slot and its root end on `ports`: `both` ways, `to-target` (the child's
   * packets) or `to-client` (the root side's packets). Silent: no RST, no ICMP, and for both ends
   * the packet was sent. Resolves once the drop is in force.
   */
  async partition(name, ports, direction) {
    const s = this.#slot(name);
    if (s.cut) throw new Error(`slot '${name}' is already partitioned`);
    if (!DIRECTIONS.includes(direction))
      throw new RangeError(`direction is both, to-target or to-client, got '${direction}'`);
    s.cut = { ports, direction };
    const list = `{ ${ports.join(', ')} }`;
    const commands = [];
    if (direction !== 'to-target') commands.push(`add element netdev ${NFT_TABLE} in${s.index} ${list}`);
    if (direction !== 'to-client') commands.push(`add element netdev ${NFT_TABLE} out${s.index} ${list}`);
    await this.#firewall.run(commands);
  }

  /**
   * Sends the slot's TCP for `from` (`host:port`, a loopback address the broker advertises) to
   * the slot's root end on `toPort` instead: a client library with no socket hook, which connects
   * where the broker's metadata says, then reaches the slot's fault proxy and passes through the
   * slot's drops like everything else. A `nat` table in the slot's namespace rewrites the
   * destination (the OUTPUT hook) and the source to the slot's own address (POSTROUTING);
   * `route_localnet` lets a packet addressed to 127.0.0.1 leave on eth0 at all. Nothing is
   * rewritten outside the slot's namespace.
   */
  redirect(name, from, toPort) {
    const s = this.#slot(name);
    const [host, port] = from.split(':');
    if (!/^127\.\d+\.\d+\.\d+$/.test(host) || !/^\d+$/.test(port ?? ''))
      throw new RangeError(`redirect takes a loopback host:port, got '${from}'`);
    for (const dev of ['all', 'eth0'])
      inNs(s.netns, 'sysctl', ['-q', '-w', `net.ipv4.conf.${dev}.route_localnet=1`]);
    const table = [
      `table ip ${NFT_TABLE}_nat {`,
      '  chain out {',
      '    type nat hook output priority -100; policy accept;',
      `    ip daddr ${host} tcp dport ${port} dnat to ${s.hostAddr}:${toPort}`,
      '  }',
      '  chain post {',
      '    type nat hook postrouting priority 100; policy accept;',
      `    oifname "eth0" snat to ${s.nsAddr}`,
      '  }',
      '}',
      '',
    ].join('\n');
    // A second redirect of the slot replaces the first.
    runs('ip', ['netns', 'exec', s.netns, 'nft', 'delete', 'table', 'ip', `${NFT_TABLE}_nat`]);
    inNs(s.netns, 'nft', ['-f', '-'], table);
  }

  /** Lifts the slot's drops. */
  async heal(name) {
    const s = this.#slot(name);
    if (!s.cut) return;
    await this.#firewall.run([
      `flush set netdev ${NFT_TABLE} in${s.index}`,
      `flush set netdev ${NFT_TABLE} out${s.index}`,
    ]);
    s.cut = undefined;
  }

  /** The ports a slot's drops hold now, by direction (for tests). */
  dropping(name) {
    const s = this.#slot(name);
    const ports = (set) => {
      const m = /elements = \{([^}]*)\}/.exec(
        inNs(this.#wire, 'nft', ['list', 'set', 'netdev', NFT_TABLE, set]),
      );
      return m ? m[1].split(',').map((p) => Number(p.trim())) : [];
    };
    return { 'to-client': ports(`in${s.index}`), 'to-target': ports(`out${s.index}`) };
  }

  /** Deletes every namespace (the veths go with them). Synchronous: safe in an exit handler. */
  destroy() {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#firewall?.close();
    for (const ns of [...[...this.#slots.values()].map((s) => s.netns), this.#wire]) {
      killIn(ns);
      runs('ip', ['netns', 'del', ns]);
    }
    for (const s of this.#slots.values())
      if (existsSync(`/sys/class/net/${s.hostDev}`)) runs('ip', ['link', 'del', s.hostDev]);
  }
}
