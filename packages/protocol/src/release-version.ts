/**
 * The one ordering of Keelson release numbers, for every package that compares them: the
 * database's schema gate (packages/db), the operator's upgrade checks (packages/cli) and the
 * choice of PostgreSQL's client programs (control-plane). Here because packages/protocol is the
 * package they all depend on (a release packs it with each of them).
 */

/** Release numbers as semver orders them: number by number ("0.10.0" > "0.9.3"); a pre-release sorts before its release. */
export function compareVersions(a: string, b: string): number {
  // Split at the first "-" only: a pre-release may hold more ("1.0.0-rc-1").
  const [coreA = "", preA] = a.split(/-(.*)/s);
  const [coreB = "", preB] = b.split(/-(.*)/s);
  const partsA = coreA.split(".").map(Number);
  const partsB = coreB.split(".").map(Number);
  for (let i = 0; i < Math.max(partsA.length, partsB.length); i++) {
    const diff = (partsA[i] ?? 0) - (partsB[i] ?? 0);
    if (diff !== 0) return Math.sign(diff);
  }
  if (preA === preB) return 0;
  if (preA === undefined) return 1;
  if (preB === undefined) return -1;
  // Pre-release identifiers one by one: numbers as numbers ("rc.2" < "rc.10"), words as text.
  const idsA = preA.split(".");
  const idsB = preB.split(".");
  for (let i = 0; i < Math.max(idsA.length, idsB.length); i++) {
    const x = idsA[i];
    const y = idsB[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    const numeric = /^\d+$/.test(x) && /^\d+$/.test(y);
    const diff = numeric ? Number(x) - Number(y) : x < y ? -1 : x > y ? 1 : 0;
    if (diff !== 0) return Math.sign(diff);
  }
  return 0;
}
