/** Which binary may run on a schema (the `keelson_schema` table, see schema.ts). */

export class SchemaTooNewError extends Error {
  override name = "SchemaTooNewError";
  constructor(
    readonly required: string,
    readonly binary: string,
  ) {
    super(
      `this database needs keelson-server ${required} or newer, and this one is ${binary}: ` +
        "start a newer keelson-server (or restore the backup taken before the upgrade)",
    );
  }
}

/** Release numbers as semver orders them: number by number ("0.10.0" > "0.9.3"); a pre-release sorts before its release. */
export function compareVersions(a: string, b: string): number {
  const [coreA = "", preA] = a.split("-", 2);
  const [coreB = "", preB] = b.split("-", 2);
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

/** Throws when the schema asks for a newer binary than this one. */
export function assertBinaryCanRun(required: string | undefined, binary: string): void {
  if (required !== undefined && compareVersions(binary, required) < 0) throw new SchemaTooNewError(required, binary);
}
