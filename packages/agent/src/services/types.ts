/**
 * What a phase asks of the service manager, whichever runs underneath (systemd units or direct
 * supervision). A service is named once (`etcd`, `kubelet`) and installed from a spec; the
 * manager decides how it is kept alive.
 */

export interface HttpProbe {
  kind: "http";
  url: string;
  /** PEM of the CA to trust for https URLs. */
  ca?: string;
  /** Client certificate and key (PEM) when the endpoint wants one. */
  cert?: string;
  key?: string;
  /** Talk HTTP over this unix socket instead of TCP (containerd). */
  socketPath?: string;
  timeoutMs?: number;
}

export interface ExecProbe {
  kind: "exec";
  command: string;
  args: string[];
  env?: Record<string, string>;
  timeoutMs?: number;
}

export type HealthProbe = HttpProbe | ExecProbe;

export interface ServiceSpec {
  /** Short name; systemd unit `keelson-<name>.service`, pid file `<name>.pid`. */
  name: string;
  description: string;
  /** Absolute path of the executable. */
  command: string;
  args: string[];
  /** The whole environment of the service (nothing leaks in from the agent's own). */
  env?: Record<string, string>;
  /** KEY=VALUE lines read when the service starts (systemd EnvironmentFile=). */
  environmentFile?: string;
  cwd?: string;
  health?: HealthProbe;
  /** How long SIGTERM gets before SIGKILL. */
  stopTimeoutMs?: number;
  /**
   * Stopping the service signals its main process only, never what it started (containerd: its
   * shims keep the containers running across a runtime restart). systemd: `KillMode=process`,
   * and `Delegate=yes` so the cgroups the runtime creates for containers stay its own.
   */
  keepChildrenOnStop?: boolean;
}

export type ServiceState = "running" | "unhealthy" | "stopped" | "failed";

export interface ServiceStatus {
  name: string;
  state: ServiceState;
  pid: number | null;
  /** Why it is not running or not healthy, with the tail of its log when there is one. */
  detail: string;
  restarts: number;
}

export interface ServiceManager {
  readonly kind: "systemd" | "direct";
  /** Records (or replaces) the spec; does not start it. Returns true when the spec changed. */
  install(spec: ServiceSpec): Promise<boolean>;
  /** Starts it unless it already runs. */
  start(name: string): Promise<void>;
  restart(name: string): Promise<void>;
  /** Stops it and keeps it stopped; a service that is not installed is already stopped. */
  stop(name: string): Promise<void>;
  /** Stops it and forgets its spec. */
  uninstall(name: string): Promise<void>;
  status(name: string): Promise<ServiceStatus>;
  /** Polls status until `running` (alive and its probe passes) or the time is up. */
  waitHealthy(name: string, options: { timeoutMs: number; signal?: AbortSignal }): Promise<ServiceStatus>;
  /** Stops background watching; the services themselves keep running. */
  close(): void;
}

export class ServiceError extends Error {
  override name = "ServiceError";
}
