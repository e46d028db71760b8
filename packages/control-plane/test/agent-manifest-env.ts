import { parseAllDocuments } from "yaml";

/**
 * The environment Kubernetes would give the agent container of a deployment YAML (spec §4.2):
 * its `env`, with `configMapKeyRef` and `secretKeyRef` resolved from the manifest's ConfigMap and
 * Secret, plus what the pod adds (`pod`: KUBERNETES_SERVICE_HOST/PORT). Tests feed it to the
 * agent's settings parser, so the manifest and the agent must agree.
 */
export function agentEnvOf(yaml: string, pod: Record<string, string>): Record<string, string> {
  const objects = parseAllDocuments(yaml).map((d) => d.toJS() as Record<string, unknown>);
  const of = <T>(kind: string) => objects.find((o) => o.kind === kind) as T;
  const config = of<{ data: Record<string, string> }>("ConfigMap").data;
  const secret = (name: string) =>
    (
      objects.find((o) => o.kind === "Secret" && (o.metadata as { name: string }).name === name) as
        | { stringData?: Record<string, string> }
        | undefined
    )?.stringData ?? {};
  const deployment = of<{ spec: { template: { spec: { containers: { env: EnvVar[] }[] } } } }>("Deployment");
  const env: Record<string, string> = { ...pod };
  for (const e of deployment.spec.template.spec.containers[0]?.env ?? []) {
    const fromConfig = e.valueFrom?.configMapKeyRef?.key;
    const fromSecret = e.valueFrom?.secretKeyRef;
    const value =
      e.value ?? (fromConfig ? config[fromConfig] : fromSecret ? secret(fromSecret.name)[fromSecret.key] : undefined);
    if (value === undefined) throw new Error(`the manifest's env ${e.name} resolves to nothing`);
    env[e.name] = value;
  }
  return env;
}

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { configMapKeyRef?: { key: string }; secretKeyRef?: { name: string; key: string } };
}

/** The deployment YAML's object of `kind` named `name` (e.g. the identity Secret a test applies). */
export function manifestObjectOf(yaml: string, kind: string, name: string): Record<string, unknown> {
  const found = parseAllDocuments(yaml)
    .map((d) => d.toJS() as { kind: string; metadata: { name: string } })
    .find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`the manifest has no ${kind} ${name}`);
  return found as unknown as Record<string, unknown>;
}
