import { join } from "node:path";
import type { CertProfile } from "@keelson/protocol";

/**
 * Every file the phases write, all under the host root (KEELSON_HOST_ROOT). One place, so the
 * phases, the node cleanup and the tests agree on where things live.
 */
export function nodePaths(hostRoot: string) {
  const at = (...parts: string[]) => join(hostRoot, ...parts);
  const pki = at("etc", "keelson", "pki");
  const kube = at("etc", "kubernetes");
  return {
    root: hostRoot,
    keelsonEtc: at("etc", "keelson"),
    nodeEnv: at("etc", "keelson", "node.env"),
    networkEnv: at("etc", "keelson", "network.env"),
    bouncerTokens: at("etc", "keelson", "bouncer-tokens.json"),
    pki,
    caCert: join(pki, "ca.crt"),
    /** The service-account token signing key pair (kube-apiserver --service-account-*). */
    serviceAccountKey: join(pki, "service-account.key"),
    serviceAccountPub: join(pki, "service-account.pub"),
    /** The certificates API's signing CA (kube-controller-manager --cluster-signing-*-file). */
    clusterSigningCert: join(pki, "cluster-signing.crt"),
    clusterSigningKey: join(pki, "cluster-signing.key"),
    cert: (profile: CertProfile) => join(pki, `${profile}.crt`),
    key: (profile: CertProfile) => join(pki, `${profile}.key`),
    csr: (profile: CertProfile) => join(pki, `${profile}.csr`),
    kube,
    kubeletConfig: join(kube, "kubelet-config.json"),
    kubeletKubeconfig: join(kube, "kubelet.kubeconfig"),
    /** The kubelet's --config-dir drop-ins (Kubernetes 1.30+), merged over kubeletConfig in name order. */
    kubeletConfigDir: join(kube, "kubelet.conf.d"),
    kubeProxyConfig: join(kube, "kube-proxy-config.json"),
    kubeProxyKubeconfig: join(kube, "kube-proxy.kubeconfig"),
    apiserverWebhookConfig: join(kube, "authn-webhook.kubeconfig"),
    controllerManagerKubeconfig: join(kube, "controller-manager.kubeconfig"),
    schedulerKubeconfig: join(kube, "scheduler.kubeconfig"),
    schedulerConfig: join(kube, "kube-scheduler-config.json"),
    manifests: join(kube, "manifests"),
    containerdConfig: at("etc", "containerd", "config.toml"),
    containerdRoot: at("var", "lib", "containerd"),
    containerdState: at("run", "containerd"),
    containerdSocket: at("run", "containerd", "containerd.sock"),
    dockerDaemonJson: at("etc", "docker", "daemon.json"),
    aptDockerList: at("etc", "apt", "sources.list.d", "keelson-docker.list"),
    yumDockerRepo: at("etc", "yum.repos.d", "keelson-docker.repo"),
    cniConfDir: at("etc", "cni", "net.d"),
    flannelSubnetEnv: at("run", "flannel", "subnet.env"),
    etcdEnv: at("etc", "etcd", "etcd.env"),
    etcdDataDir: at("var", "lib", "etcd"),
    /** Kernel modules and sysctls Kubernetes needs, applied at boot (misc-checks phase). */
    modulesLoadConf: at("etc", "modules-load.d", "keelson.conf"),
    sysctlConf: at("etc", "sysctl.d", "99-keelson.conf"),
    keepalivedConf: at("etc", "keepalived", "keepalived.conf"),
    corefile: at("etc", "coredns", "Corefile"),
    userImages: at("var", "lib", "keelson", "images"),
    keelsonVar: at("var", "lib", "keelson"),
    /** Present while Keelson (not a user) holds the node cordoned. */
    cordonMarker: at("var", "lib", "keelson", "cordoned-by-keelson"),
    runDir: at("run", "keelson"),
    logDir: at("var", "log", "keelson"),
  };
}

export type NodePaths = ReturnType<typeof nodePaths>;
