import dgram from "node:dgram";

/**
 * A DNS client for tests: one query over UDP, and the whole answer decoded (RFC 1035 4.1 with
 * name compression; SRV after RFC 2782). Node's own resolver gives the answer section only and
 * hides the rcode of an empty answer, which the tests of the coredns stand-in need to see.
 */

export const QTYPE = { A: 1, NS: 2, CNAME: 5, SOA: 6, PTR: 12, MX: 15, TXT: 16, AAAA: 28, SRV: 33, AXFR: 252 };
export const RCODE_NAMES = ["NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"];

const TYPE_NAMES = Object.fromEntries(Object.entries(QTYPE).map(([k, v]) => [v, k]));

export interface DnsRecord {
  name: string;
  type: string;
  ttl: number;
  /** A/AAAA: the address; CNAME/PTR/NS: the target; TXT: the text; SRV: "prio weight port target"; SOA: "mname rname serial refresh retry expire minimum". */
  data: string;
}

export interface DnsAnswer {
  rcode: string;
  aa: boolean;
  tc: boolean;
  answer: DnsRecord[];
  authority: DnsRecord[];
  additional: DnsRecord[];
}

function readName(buf: Buffer, offset: number): { name: string; next: number } {
  const labels: string[] = [];
  let at = offset;
  let next: number | undefined;
  for (let jumps = 0; jumps < 64; ) {
    const len = buf.readUInt8(at);
    if ((len & 0xc0) === 0xc0) {
      next ??= at + 2;
      at = ((len & 0x3f) << 8) | buf.readUInt8(at + 1);
      jumps++;
      continue;
    }
    if (len === 0) {
      next ??= at + 1;
      return { name: labels.length === 0 ? "." : `${labels.join(".")}.`, next };
    }
    labels.push(buf.toString("latin1", at + 1, at + 1 + len));
    at += 1 + len;
  }
  throw new Error("too many compression pointers");
}

function rdataText(buf: Buffer, type: number, at: number, length: number): string {
  switch (type) {
    case QTYPE.A:
      return [...buf.subarray(at, at + 4)].join(".");
    case QTYPE.AAAA: {
      const groups: string[] = [];
      for (let i = 0; i < 16; i += 2) groups.push(buf.readUInt16BE(at + i).toString(16));
      return groups.join(":");
    }
    case QTYPE.CNAME:
    case QTYPE.PTR:
    case QTYPE.NS:
      return readName(buf, at).name;
    case QTYPE.SRV: {
      const target = readName(buf, at + 6).name;
      return `${buf.readUInt16BE(at)} ${buf.readUInt16BE(at + 2)} ${buf.readUInt16BE(at + 4)} ${target}`;
    }
    case QTYPE.SOA: {
      const mname = readName(buf, at);
      const rname = readName(buf, mname.next);
      const nums = [0, 4, 8, 12, 16].map((o) => buf.readUInt32BE(rname.next + o));
      return [mname.name, rname.name, ...nums].join(" ");
    }
    case QTYPE.TXT: {
      const parts: string[] = [];
      for (let i = at; i < at + length; i += 1 + buf.readUInt8(i)) {
        parts.push(buf.toString("utf8", i + 1, i + 1 + buf.readUInt8(i)));
      }
      return parts.join("");
    }
    default:
      return buf.subarray(at, at + length).toString("hex");
  }
}

/** Decodes a DNS response message. */
export function decodeAnswer(buf: Buffer): DnsAnswer {
  const flags = buf.readUInt16BE(2);
  const [questions, ...counts] = [4, 6, 8, 10].map((o) => buf.readUInt16BE(o));
  let at = 12;
  for (let i = 0; i < (questions ?? 0); i++) at = readName(buf, at).next + 4;
  const answer: DnsRecord[] = [];
  const authority: DnsRecord[] = [];
  const additional: DnsRecord[] = [];
  const sections = [answer, authority, additional];
  for (const [s, count] of counts.entries()) {
    for (let i = 0; i < count; i++) {
      const { name, next } = readName(buf, at);
      const type = buf.readUInt16BE(next);
      const ttl = buf.readUInt32BE(next + 4);
      const length = buf.readUInt16BE(next + 8);
      const start = next + 10;
      // The OPT pseudo-record (EDNS0) is no record of the answer.
      if (type !== 41) {
        sections[s]?.push({
          name,
          type: TYPE_NAMES[type] ?? String(type),
          ttl,
          data: rdataText(buf, type, start, length),
        });
      }
      at = start + length;
    }
  }
  return {
    rcode: RCODE_NAMES[flags & 0xf] ?? String(flags & 0xf),
    aa: Boolean(flags & 0x0400),
    tc: Boolean(flags & 0x0200),
    answer,
    authority,
    additional,
  };
}

/** A query message for `name` and `type` (recursion desired, no EDNS). */
export function encodeQuery(id: number, name: string, type: number): Buffer {
  const labels = name
    .replace(/\.$/, "")
    .split(".")
    .filter(Boolean)
    .map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, "latin1")]));
  const header = Buffer.from([id >> 8, id & 0xff, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
  return Buffer.concat([header, ...labels, Buffer.from([0, type >> 8, type & 0xff, 0, 1])]);
}

/**
 * One query over UDP to host:port, sent again every `retryMs` as a resolver does (UDP may lose
 * it, and a server starved of CPU on a loaded machine may take a while); rejects after
 * `timeoutMs` without an answer.
 */
export function queryUdp(host: string, port: number, name: string, type: number, timeoutMs = 6000, retryMs = 1000) {
  const id = Math.floor(Math.random() * 0xffff);
  const socket = dgram.createSocket(host.includes(":") ? "udp6" : "udp4");
  const query = encodeQuery(id, name, type);
  return new Promise<DnsAnswer>((resolve, reject) => {
    const again = setInterval(() => socket.send(query, port, host), retryMs);
    const done = () => {
      clearTimeout(timer);
      clearInterval(again);
      socket.close();
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`no answer to ${name} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on("message", (msg) => {
      if (msg.readUInt16BE(0) !== id) return;
      done();
      try {
        resolve(decodeAnswer(msg));
      } catch (err) {
        reject(err);
      }
    });
    socket.on("error", (err) => {
      done();
      reject(err);
    });
    socket.send(query, port, host);
  });
}
