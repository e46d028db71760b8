import {
  CreateLaunchTemplateVersionCommand,
  type CreateLaunchTemplateVersionResult,
  DescribeLaunchTemplatesCommand,
  type DescribeLaunchTemplatesResult,
  DescribeLaunchTemplateVersionsCommand,
  type DescribeLaunchTemplateVersionsResult,
  ModifyLaunchTemplateCommand,
} from "@aws-sdk/client-ec2";
import { clusterFilter, type DeployTarget, send } from "./target.ts";

/**
 * The user data of a cluster's launch templates after create: what their default version
 * boots (an Auto Scaling group launches `$Default`), and its replacement by a new version made
 * the default, the rest of the template unchanged. Templates are found by the cluster's tag.
 */
async function templateIds(target: DeployTarget): Promise<string[]> {
  const found = await send<DescribeLaunchTemplatesResult>(
    target,
    "ec2",
    new DescribeLaunchTemplatesCommand({ Filters: clusterFilter(target) }),
  );
  return (found?.LaunchTemplates ?? []).map((t) => t.LaunchTemplateId as string);
}

/** Each template's default user data (plain text), by template id; none before the create made them. */
export async function defaultUserData(target: DeployTarget): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const id of await templateIds(target)) {
    const found = await send<DescribeLaunchTemplateVersionsResult>(
      target,
      "ec2",
      new DescribeLaunchTemplateVersionsCommand({ LaunchTemplateId: id, Versions: ["$Default"] }),
    );
    const data = found?.LaunchTemplateVersions?.[0]?.LaunchTemplateData?.UserData ?? "";
    out.set(id, Buffer.from(data, "base64").toString("utf8"));
  }
  return out;
}

/** A new version of each template with `userData` over its default, made the default. */
export async function replaceUserData(target: DeployTarget, templates: Iterable<string>, userData: string) {
  for (const id of templates) {
    const made = await send<CreateLaunchTemplateVersionResult>(
      target,
      "ec2",
      new CreateLaunchTemplateVersionCommand({
        LaunchTemplateId: id,
        SourceVersion: "$Default",
        LaunchTemplateData: { UserData: Buffer.from(userData).toString("base64") },
      }),
    );
    await send(
      target,
      "ec2",
      new ModifyLaunchTemplateCommand({
        LaunchTemplateId: id,
        DefaultVersion: String(made?.LaunchTemplateVersion?.VersionNumber),
      }),
    );
  }
}
