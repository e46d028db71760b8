import { useState } from "preact/hooks";
import { ApiError } from "../api.ts";
import { ErrorNote, Field } from "../ui.tsx";

/**
 * The cluster fields of spec §2.1 a manual-deploy cluster takes (C: create, U: update). Values go
 * to the API as typed: the API is the one home of the §4.8 rules, and its 400 names the field,
 * which is shown beside that input. Inputs are uncontrolled (defaultValue): a re-render, such as the
 * one that shows an error, keeps what the user typed.
 */
interface FieldSpec {
  name: string;
  label: string;
  kind: "text" | "number" | "flag" | "select" | "list";
  options?: string[];
  hint?: string;
  create?: boolean;
  update?: boolean;
}

export const CLUSTER_FIELDS: FieldSpec[] = [
  { name: "name", label: "Name", kind: "text", create: true },
  { name: "kubeRoleVersion", label: "Kube role version", kind: "text", create: true, hint: "Empty: the newest" },
  { name: "containersCidr", label: "Containers CIDR", kind: "text", create: true, hint: "e.g. 10.20.0.0/16" },
  { name: "servicesCidr", label: "Services CIDR", kind: "text", create: true, hint: "e.g. 10.21.0.0/16" },
  {
    name: "networkPlugin",
    label: "Network plugin",
    kind: "select",
    options: ["", "flannel", "calico", "weave", "noop"],
    create: true,
  },
  { name: "k8sApiPort", label: "API server port", kind: "text", create: true, hint: "Default 443" },
  { name: "externalDnsName", label: "External DNS name", kind: "text", create: true },
  { name: "masterVipIpv4", label: "Master VIP (IPv4)", kind: "text", create: true },
  { name: "masterVipIface", label: "Master VIP interface", kind: "text", create: true, hint: "Needed with a VIP" },
  {
    name: "containerRuntime",
    label: "Container runtime",
    kind: "select",
    options: ["", "containerd", "docker"],
    create: true,
  },
  { name: "runtimeConfig", label: "Runtime config", kind: "text", create: true },
  { name: "allowWorkloadsOnMaster", label: "Workloads on masters", kind: "flag", create: true },
  { name: "privileged", label: "Privileged containers", kind: "flag", create: true },
  { name: "useHostname", label: "Register nodes by hostname", kind: "flag", create: true },
  {
    name: "cpuManagerPolicy",
    label: "CPU manager policy",
    kind: "select",
    options: ["", "none", "static"],
    create: true,
  },
  {
    name: "topologyManagerPolicy",
    label: "Topology manager policy",
    kind: "select",
    options: ["", "none", "best-effort", "restricted", "single-numa-node"],
    create: true,
  },
  { name: "reservedCPUs", label: "Reserved CPUs", kind: "text", create: true },
  { name: "certExpiryHrs", label: "Kubeconfig certificate hours", kind: "number", create: true, update: true },
  { name: "isEtcdBackupEnabled", label: "etcd backups", kind: "flag", create: true, update: true },
  { name: "intervalInMins", label: "Backup interval (minutes)", kind: "number", create: true, update: true },
  { name: "intervalInHours", label: "Backup interval (hours)", kind: "number", create: true, update: true },
  { name: "maxIntervalBackupCount", label: "Interval backups kept", kind: "number", create: true, update: true },
  { name: "dailyBackupTime", label: "Daily backup time (HH:MM, UTC)", kind: "text", create: true, update: true },
  { name: "maxTimestampBackupCount", label: "Daily backups kept", kind: "number", create: true, update: true },
  { name: "localPath", label: "Backup path", kind: "text", create: true, update: true },
  { name: "numWorkers", label: "Workers", kind: "number", update: true },
];

/** The form's values as the API takes them; empty inputs are left out. */
function bodyOf(form: HTMLFormElement, fields: FieldSpec[]): Record<string, unknown> {
  const data = new FormData(form);
  const body: Record<string, unknown> = {};
  for (const f of fields) {
    const raw = data.get(f.name);
    if (f.kind === "flag") {
      if (raw !== null) body[f.name] = true;
      continue;
    }
    if (typeof raw !== "string" || raw.trim() === "") continue;
    body[f.name] = f.kind === "number" && /^-?\d+$/.test(raw.trim()) ? Number(raw) : raw.trim();
  }
  return body;
}

/** Create or update: `submit` calls the API; a 400 naming a field of the form lands beside it. */
export function ClusterForm(props: {
  mode: "create" | "update";
  initial?: Record<string, unknown>;
  submit: (body: Record<string, unknown>) => Promise<void>;
  onCancel: () => void;
}) {
  const fields = CLUSTER_FIELDS.filter((f) => (props.mode === "create" ? f.create : f.update));
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const fieldError = error instanceof ApiError && error.field ? error.field : undefined;
  const onSubmit = async (event: SubmitEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await props.submit(bodyOf(event.currentTarget as HTMLFormElement, fields));
    } catch (err) {
      setError(err);
      if (err instanceof ApiError && err.field) document.getElementById(`cf-${err.field}`)?.focus();
    } finally {
      setBusy(false);
    }
  };
  const known = fields.some((f) => f.name === fieldError);
  return (
    <form
      class="cluster-form"
      onSubmit={onSubmit}
      aria-label={props.mode === "create" ? "Create a cluster" : "Update the cluster"}
    >
      <div class="grid">
        {fields.map((f) => {
          const id = `cf-${f.name}`;
          const message = fieldError === f.name ? (error as ApiError).message : undefined;
          const initial = props.initial?.[f.name];
          const common = {
            id,
            name: f.name,
            "aria-invalid": message ? true : undefined,
            "aria-describedby":
              [f.hint ? `${id}-hint` : "", message ? `${id}-error` : ""].join(" ").trim() || undefined,
          };
          return (
            <Field key={f.name} id={id} label={f.label} hint={f.hint} error={message}>
              {f.kind === "flag" ? (
                <input type="checkbox" {...common} defaultChecked={initial === true || initial === 1} />
              ) : f.kind === "select" ? (
                <select {...common}>
                  {f.options?.map((o) => (
                    <option key={o} value={o} selected={o === String(initial ?? "")}>
                      {o || "(default)"}
                    </option>
                  ))}
                </select>
              ) : (
                <input
                  {...common}
                  inputMode={f.kind === "number" ? "numeric" : undefined}
                  defaultValue={initial === undefined || initial === null ? "" : String(initial)}
                />
              )}
            </Field>
          );
        })}
      </div>
      {error && !known ? <ErrorNote error={error} /> : null}
      <div class="actions">
        <button type="submit" disabled={busy}>
          {props.mode === "create" ? "Create cluster" : "Save changes"}
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
