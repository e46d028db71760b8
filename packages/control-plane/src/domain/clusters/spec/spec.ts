/**
 * Cluster create and update bodies (v3, v4) to one validated, normalised `ClusterSpec`: the
 * canonical stored form of a cluster's §2.1 fields, whatever version and client habits wrote it.
 *
 * What is not applied: a field outside the version's create or update set (another version's
 * field, a read-only field, an unknown name) goes to `ignored` (dotted for nested names), or is
 * a 400 `unknown_field` when `strict`. A field a rule says to ignore (privateSubnets without
 * vpc; on update numWorkers while autoscaling is on, numMin/MaxWorkers while it is off) is also
 * named in `ignored`, but is never an error: the version does accept it. An invalid value of an
 * accepted field is always a 400.
 */

import { badRequest } from "../../../http/errors.ts";
import type { Catalogue } from "../../catalogue/catalogue.ts";
import { isPlainObject, toStringArray, typeName } from "./coerce.ts";
import { flattenEtcdBackup, type RawEntry } from "./etcd-backup.ts";
import {
  type ApiVersion,
  acceptedOnCreate,
  acceptedOnUpdate,
  type ClusterSpec,
  isSpecField,
  normaliseField,
  type SpecField,
} from "./fields.ts";
import { applyDefaults, checkClusterRules, type DraftSpec, pathNamer } from "./rules.ts";

export interface ParsedCreate {
  spec: ClusterSpec;
  /** Node uuids to attach right after the cluster exists (unique; disjoint from workerNodes). */
  masterNodes: string[];
  workerNodes: string[];
  ignored: string[];
}

export interface ParsedUpdate {
  /** The whole merged spec after the update. */
  spec: ClusterSpec;
  changed: (keyof ClusterSpec)[];
  ignored: string[];
}

export interface ParseOptions {
  catalogue: Catalogue;
  strict: boolean;
}

/** The body's fields, coerced. `undefined` values are "not set" (create) or "clear" (update). */
interface Collected {
  values: Map<SpecField, unknown>;
  paths: Map<SpecField, string>;
  notAccepted: string[];
}

function requireObject(body: unknown): Record<string, unknown> {
  if (!isPlainObject(body)) throw badRequest("body", `the body must be a JSON object (got ${typeName(body)})`);
  return body;
}

/** Equality of stored values: primitives, string lists (order matters), string maps (order does not). */
function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((item, i) => item === b[i]);
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && a[key] === b[key]);
  }
  return false;
}

/**
 * Coerces every field of the body the version accepts (flat or in `etcdBackup`) and lists the
 * rest. `own` takes the keys that are not spec fields but belong to the request (masterNodes).
 */
function collect(
  body: Record<string, unknown>,
  accepts: (field: SpecField) => boolean,
  own: (key: string, raw: unknown) => boolean,
): Collected {
  const values = new Map<SpecField, unknown>();
  const paths = new Map<SpecField, string>();
  const notAccepted: string[] = [];
  let nested: RawEntry[] = [];
  for (const [key, raw] of Object.entries(body)) {
    if (key === "etcdBackup") nested = flattenEtcdBackup(raw, notAccepted);
    else if (own(key, raw)) continue;
    else if (isSpecField(key) && accepts(key)) {
      values.set(key, normaliseField(key, raw, key));
      paths.set(key, key);
    } else notAccepted.push(key);
  }
  // The nested object and the flat fields are two spellings of one setting: a value given in
  // one and "not set" in the other is that value; two different values are a contradiction.
  for (const { field, raw, path } of nested) {
    if (!accepts(field)) {
      notAccepted.push(path);
      continue;
    }
    const value = normaliseField(field, raw, path);
    const flat = values.get(field);
    if (value !== undefined && flat !== undefined && !sameValue(value, flat)) {
      throw badRequest(
        path,
        `${path} (${JSON.stringify(value)}) contradicts ${field} (${JSON.stringify(flat)}); send one of them, or the same value`,
      );
    }
    if (value !== undefined || !values.has(field)) {
      values.set(field, value);
      paths.set(field, path);
    }
  }
  return { values, paths, notAccepted };
}

function rejectUnknown(notAccepted: string[], strict: boolean, version: ApiVersion, what: string): void {
  if (!strict || notAccepted.length === 0) return;
  const first = notAccepted[0] as string;
  throw badRequest(
    first,
    `${notAccepted.join(", ")} ${notAccepted.length === 1 ? "is" : "are"} not accepted by the ${version} cluster ${what} ` +
      "(fieldValidation=Strict)",
    "unknown_field",
  );
}

function checkAddonOperatorTag(values: Map<SpecField, unknown>, paths: Map<SpecField, string>, catalogue: Catalogue) {
  const tag = values.get("addonOperatorImageTag");
  if (typeof tag === "string" && !catalogue.file.addonOperatorTags.includes(tag)) {
    const path = paths.get("addonOperatorImageTag") ?? "addonOperatorImageTag";
    throw badRequest(
      path,
      `${path} ${tag} is not a supported add-on operator tag; supported: ${catalogue.file.addonOperatorTags.join(", ")}`,
    );
  }
}

function nodeList(raw: unknown, path: string): string[] {
  if (raw === null || raw === undefined) return [];
  const nodes = toStringArray(raw, path, 255);
  const seen = new Set<string>();
  for (const node of nodes) {
    if (seen.has(node)) throw badRequest(path, `${path} lists node ${node} more than once`);
    seen.add(node);
  }
  return nodes;
}

function resolveRoleVersion(spec: DraftSpec, paths: Map<SpecField, string>, catalogue: Catalogue): void {
  if (spec.kubeRoleVersion === undefined) {
    spec.kubeRoleVersion = catalogue.newest.roleVersion;
  } else if (!catalogue.find(spec.kubeRoleVersion)) {
    const path = paths.get("kubeRoleVersion") ?? "kubeRoleVersion";
    const known = catalogue.roles
      .slice(-5)
      .reverse()
      .map((r) => r.roleVersion);
    throw badRequest(
      path,
      `${path} ${spec.kubeRoleVersion} is not in the catalogue of role versions; valid ones include ${known.join(", ")}`,
    );
  }
  if (spec.containerRuntime === undefined) {
    const runtime = catalogue.find(spec.kubeRoleVersion)?.containerRuntime;
    spec.containerRuntime = runtime === "docker" ? "docker" : "containerd";
  }
}

export function parseClusterCreate(version: ApiVersion, body: unknown, opts: ParseOptions): ParsedCreate {
  const object = requireObject(body);
  let masterNodes: string[] = [];
  let workerNodes: string[] = [];
  const collected = collect(
    object,
    (field) => acceptedOnCreate(field, version),
    (key, raw) => {
      if (key === "masterNodes") masterNodes = nodeList(raw, key);
      else if (key === "workerNodes") workerNodes = nodeList(raw, key);
      else return false;
      return true;
    },
  );
  rejectUnknown(collected.notAccepted, opts.strict, version, "create");
  const both = workerNodes.find((node) => masterNodes.includes(node));
  if (both) throw badRequest("workerNodes", `node ${both} is in both masterNodes and workerNodes; it can be only one`);

  const spec: DraftSpec = {};
  for (const [field, value] of collected.values) {
    if (value !== undefined) (spec as Record<string, unknown>)[field] = value;
  }
  if (spec.name === undefined) throw badRequest("name", "name is required");
  checkAddonOperatorTag(collected.values, collected.paths, opts.catalogue);
  resolveRoleVersion(spec, collected.paths, opts.catalogue);
  applyDefaults(spec);
  const dropped = checkClusterRules(spec, pathNamer(collected.paths));
  return {
    spec: spec as ClusterSpec,
    masterNodes,
    workerNodes,
    ignored: [...collected.notAccepted, ...dropped],
  };
}

/**
 * §2.1: on update numWorkers applies only while autoscaling is off (it is an AWS-only feature,
 * so this is the "AWS cluster" case), numMinWorkers/numMaxWorkers only while it is on.
 */
function inapplicableOnUpdate(current: ClusterSpec): SpecField[] {
  return current.enableCAS === true ? ["numWorkers"] : ["numMinWorkers", "numMaxWorkers"];
}

export function parseClusterUpdate(
  version: ApiVersion,
  body: unknown,
  current: ClusterSpec,
  opts: ParseOptions,
): ParsedUpdate {
  const object = requireObject(body);
  const collected = collect(
    object,
    (field) => acceptedOnUpdate(field, version),
    () => false,
  );
  rejectUnknown(collected.notAccepted, opts.strict, version, "update");
  checkAddonOperatorTag(collected.values, collected.paths, opts.catalogue);

  const skipped = inapplicableOnUpdate(current).filter((field) => collected.values.has(field));
  const next: Record<string, unknown> = { ...current };
  for (const [field, value] of collected.values) {
    if (skipped.includes(field)) continue;
    if (value === undefined) delete next[field];
    else next[field] = value;
  }
  const spec = next as DraftSpec;
  applyDefaults(spec);
  const dropped = checkClusterRules(spec, pathNamer(collected.paths));

  const before: Readonly<Record<string, unknown>> = current;
  const keys = new Set([...Object.keys(before), ...Object.keys(next)]);
  const changed = [...keys].filter((key): key is SpecField => isSpecField(key) && !sameValue(before[key], next[key]));
  return {
    spec: spec as ClusterSpec,
    changed,
    ignored: [...collected.notAccepted, ...skipped, ...dropped],
  };
}
