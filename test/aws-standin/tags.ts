/**
 * STAND-IN, for tests: the tags every created resource keeps, and the tag filters of EC2
 * (`Filter.N.Name=tag:<key>` / `tag-key`) and Auto Scaling (`Filters.member.N.Name=tag:<key>`).
 * One book per stand-in: a resource's id → its region, kind and tags, so a test can list what
 * a cluster left behind whatever service made it.
 */
export type Tags = Map<string, string>;

export interface TaggedResource {
  id: string;
  region: string;
  /** `vpc`, `subnet`, `security-group`, `launch-template`, `instance`, `auto-scaling-group`, … */
  kind: string;
  tags: Tags;
}

export class TagBook {
  private readonly resources = new Map<string, TaggedResource>();

  add(region: string, kind: string, id: string, tags: Tags): TaggedResource {
    const resource = { id, region, kind, tags: new Map(tags) };
    this.resources.set(id, resource);
    return resource;
  }

  get(id: string): TaggedResource | undefined {
    return this.resources.get(id);
  }

  remove(id: string): void {
    this.resources.delete(id);
  }

  /** Every live resource whose tag `key` is `value` (any kind, any region). */
  withTag(key: string, value: string): TaggedResource[] {
    return [...this.resources.values()].filter((r) => r.tags.get(key) === value);
  }

  all(): TaggedResource[] {
    return [...this.resources.values()];
  }
}

/** `Prefix.N.Key` / `Prefix.N.Value` pairs (EC2 `Tag.N`, query `Tags.member.N`). */
export function tagParams(params: URLSearchParams, prefix: string): Tags {
  const tags: Tags = new Map();
  for (let i = 1; params.has(`${prefix}.${i}.Key`); i++) {
    tags.set(params.get(`${prefix}.${i}.Key`) as string, params.get(`${prefix}.${i}.Value`) ?? "");
  }
  return tags;
}

/** EC2's `TagSpecification.N.ResourceType` + `TagSpecification.N.Tag.M`: the tags for `type`. */
export function tagSpecifications(params: URLSearchParams, type: string): Tags {
  const tags: Tags = new Map();
  for (let i = 1; params.has(`TagSpecification.${i}.ResourceType`); i++) {
    if (params.get(`TagSpecification.${i}.ResourceType`) !== type) continue;
    for (const [k, v] of tagParams(params, `TagSpecification.${i}.Tag`)) tags.set(k, v);
  }
  return tags;
}

/** Whether `tags` pass EC2-style filters (`tag:<key>` with values, `tag-key` with keys); other names are not tag filters. */
export function tagsMatch(tags: Tags, filters: Map<string, string[]>): boolean {
  for (const [name, values] of filters) {
    if (name.startsWith("tag:")) {
      const actual = tags.get(name.slice(4));
      if (actual === undefined || !values.includes(actual)) return false;
    } else if (name === "tag-key" && !values.some((v) => tags.has(v))) return false;
  }
  return true;
}
