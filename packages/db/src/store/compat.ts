/** Which binary may run on a schema (the `keelson_schema` table, see schema.ts). */

import { compareVersions } from "@keelson/protocol";

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

/** Throws when the schema asks for a newer binary than this one. */
export function assertBinaryCanRun(required: string | undefined, binary: string): void {
  if (required !== undefined && compareVersions(binary, required) < 0) throw new SchemaTooNewError(required, binary);
}
