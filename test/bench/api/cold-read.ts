// Cold against warm single reads: GET /v4/{p}/clusters/{uuid} right after a PUT of that cluster
// (its record changed: the read computes its answer again) and right after a PUT of another
// cluster of the project (cached under the cluster's own change stamp, so served from the cache;
// before the per-cluster stamps every write made it cold), against the same GET repeated with
// nothing written; and the same read after a write of that cluster once the operation the write
// started (a cluster update pushes the settings to the nodes and settles the task) has ended, so
// the read pays for its cache miss alone and not for sharing the server with that operation.
// One request at a time over one kept-alive connection, so each figure is one request's latency.
// The settled read comes after the server waited between the polls (5 ms each): on this machine a
// read after even 5-10 ms of idle costs up to twice one sent back to back, cached or not (the CPU
// and its caches gone cold), so the warm read is also taken after such a pause and a poll.

export interface ColdWarm {
  warm: { p50: number; mean: number };
  /** After a write of the cluster read. */
  cold: { p50: number; mean: number };
  /** After a write of another cluster. */
  afterOther: { p50: number; mean: number };
  /** After a write of the cluster read, once the operation it started ended. */
  settled: { p50: number; mean: number };
  /** With nothing written, after a pause of one poll interval and a poll: the settled read's like. */
  warmAfterPause: { p50: number; mean: number };
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0;
const summary = (ms: number[]) => {
  const sorted = [...ms].sort((a, b) => a - b);
  return { p50: percentile(sorted, 0.5), mean: ms.reduce((a, b) => a + b, 0) / ms.length };
};

export async function coldWarm(
  base: string,
  token: string,
  target: string,
  others: readonly string[],
  rounds: number,
): Promise<ColdWarm> {
  const headers = { "x-auth-token": token };
  const read = async () => {
    const started = performance.now();
    const res = await fetch(`${base}/${target}`, { headers });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`GET ${target}: ${res.status}`);
    return performance.now() - started;
  };
  const write = async (i: number, uuid: string) => {
    const res = await fetch(`${base}/${uuid}`, {
      method: "PUT",
      headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify({ tags: { round: String(i) } }),
    });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`PUT: ${res.status}`);
  };
  // The cluster's newest operation (the write's), polled until it ended.
  const operations = `${base.replace(/\/clusters$/, "")}/operations?target=${target}&limit=1`;
  const pollInterval = () => new Promise((r) => setTimeout(r, 5));
  const operationEnded = async () => {
    for (let polls = 0; polls < 400; polls++) {
      const res = await fetch(operations, { headers });
      const [op] = (await res.json()) as { state: string }[];
      if (op?.state === "succeeded" || op?.state === "failed") return;
      await pollInterval();
    }
    throw new Error(`the operation on ${target} did not end in 400 polls`);
  };
  const warm: number[] = [];
  const cold: number[] = [];
  const afterOther: number[] = [];
  const settled: number[] = [];
  const warmAfterPause: number[] = [];
  for (let i = 0; i < 50; i++) await read();
  // The three in turns, so the machine's drifting load falls on each alike.
  for (let i = 0; i < rounds; i++) {
    await read();
    warm.push(await read());
    await pollInterval();
    await operationEnded();
    warmAfterPause.push(await read());
    await write(i, others[i % others.length] as string);
    afterOther.push(await read());
    await write(i, target);
    cold.push(await read());
    await write(i, target);
    await operationEnded();
    settled.push(await read());
  }
  return {
    warm: summary(warm),
    cold: summary(cold),
    afterOther: summary(afterOther),
    settled: summary(settled),
    warmAfterPause: summary(warmAfterPause),
  };
}
