import { addons } from "@keelson/db";
import { and, eq } from "drizzle-orm";
import type { Keelson } from "../../context.ts";
import type { OperationKind } from "../../runner/types.ts";
import { ADDONS_REMOVE } from "./remove-addons.ts";

/**
 * `addons.remove`: agents cannot uninstall add-ons from a running cluster, so removal is the
 * bookkeeping: rows marked `removing` become `removed`.
 * Idempotent: running it again after a crash changes nothing more.
 */
export function addonOperationKinds(_keelson: Keelson): OperationKind[] {
  return [
    {
      kind: ADDONS_REMOVE,
      steps: () => [
        {
          name: "mark-removed",
          run: async (ctx) => {
            await ctx.db
              .update(addons)
              .set({ state: "removed" })
              .where(and(eq(addons.clusterId, ctx.op.targetId), eq(addons.state, "removing")));
          },
        },
      ],
    },
  ];
}
