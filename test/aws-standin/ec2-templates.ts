import { Ec2Error, listParam } from "./ec2.ts";
import { launchTemplateData, launchTemplateXml } from "./ec2-deploy.ts";
import type { LaunchTemplateData, LaunchTemplateRecord, World } from "./world.ts";
import { el, items } from "./xml.ts";

/**
 * STAND-IN, for tests: launch template versions (Amazon EC2 API Reference, 2016-11-15, query
 * protocol): CreateLaunchTemplateVersion (LaunchTemplateData required, the template by
 * LaunchTemplateId or LaunchTemplateName, SourceVersion's data under the given data),
 * ModifyLaunchTemplate (SetDefaultVersion: what a launch without a version, such as an Auto
 * Scaling group's `$Default`, uses from then on) and DescribeLaunchTemplateVersions
 * (LaunchTemplateVersion.N: numbers, `$Latest`, `$Default`). The not-found codes are EC2's
 * (`InvalidLaunchTemplateId.NotFound`, `InvalidLaunchTemplateName.NotFoundException`,
 * `InvalidLaunchTemplateId.VersionNotFound`); the wording of the version and missing-parameter
 * messages follows EC2's other messages, not a captured answer.
 */
function templateOf(world: World, params: URLSearchParams): LaunchTemplateRecord {
  const id = params.get("LaunchTemplateId");
  const name = params.get("LaunchTemplateName");
  if (id) {
    const found = world.launchTemplates.get(id);
    if (!found) {
      throw new Ec2Error(
        400,
        "InvalidLaunchTemplateId.NotFound",
        `The specified launch template, with template ID ${id}, does not exist.`,
      );
    }
    return found;
  }
  if (name) {
    const found = [...world.launchTemplates.values()].find((t) => t.launchTemplateName === name);
    if (!found) {
      throw new Ec2Error(
        400,
        "InvalidLaunchTemplateName.NotFoundException",
        `The specified launch template, with template name ${name}, does not exist.`,
      );
    }
    return found;
  }
  throw new Ec2Error(
    400,
    "MissingParameter",
    "The request must contain the parameter LaunchTemplateName or LaunchTemplateId",
  );
}

/** A version by number, `$Latest` or `$Default`. */
function versionNumber(template: LaunchTemplateRecord, version: string): number {
  const n =
    version === "$Latest"
      ? template.versions.length
      : version === "$Default"
        ? template.defaultVersion
        : Number(version);
  if (!Number.isInteger(n) || n < 1 || n > template.versions.length) {
    throw new Ec2Error(
      400,
      "InvalidLaunchTemplateId.VersionNotFound",
      `Could not find launch template version ${version} for the launch template ${template.launchTemplateId}`,
    );
  }
  return n;
}

function versionXml(template: LaunchTemplateRecord, n: number): string[] {
  const data = template.versions[n - 1] as LaunchTemplateData;
  return [
    el("launchTemplateId", template.launchTemplateId),
    el("launchTemplateName", template.launchTemplateName),
    el("versionNumber", n),
    el("defaultVersion", n === template.defaultVersion),
    el("launchTemplateData", [
      el("imageId", data.imageId),
      el("instanceType", data.instanceType),
      items(
        "securityGroupIdSet",
        data.securityGroupIds.map((g) => [g]),
      ),
      el("userData", data.userData),
    ]),
  ];
}

export function ec2TemplateAction(world: World, action: string, params: URLSearchParams): string | undefined {
  switch (action) {
    case "CreateLaunchTemplateVersion": {
      if (![...params.keys()].some((k) => k.startsWith("LaunchTemplateData."))) {
        throw new Ec2Error(400, "MissingParameter", "The request must contain the parameter LaunchTemplateData");
      }
      const template = templateOf(world, params);
      const source = params.get("SourceVersion");
      const base = source ? template.versions[versionNumber(template, source) - 1] : undefined;
      template.versions.push(launchTemplateData(params, base));
      return el("launchTemplateVersion", versionXml(template, template.versions.length));
    }
    case "ModifyLaunchTemplate": {
      const template = templateOf(world, params);
      const wanted = params.get("SetDefaultVersion");
      if (wanted) {
        template.defaultVersion = versionNumber(template, wanted);
        Object.assign(template, template.versions[template.defaultVersion - 1]);
      }
      return el("launchTemplate", launchTemplateXml(world, template));
    }
    case "DescribeLaunchTemplateVersions": {
      const template = templateOf(world, params);
      const asked = listParam(params, "LaunchTemplateVersion");
      const numbers =
        asked.length > 0 ? asked.map((v) => versionNumber(template, v)) : template.versions.map((_, i) => i + 1);
      return items(
        "launchTemplateVersionSet",
        numbers.map((n) => versionXml(template, n)),
      );
    }
    default:
      return undefined;
  }
}
