import { type FunctionComponent, render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { call, whenSessionRefused } from "./api.ts";
import { ClusterPage } from "./pages/cluster.tsx";
import { ClustersPage } from "./pages/clusters.tsx";
import { HostsPage } from "./pages/hosts.tsx";
import { LoginPage } from "./pages/login.tsx";
import { OperationsPage } from "./pages/operations.tsx";
import { loadSession, type Session, saveSession } from "./session.ts";
import "./styles.css";

type WebCliProps = { session: Session; clusterId: string };

/** The terminal (xterm.js) is most of the console's weight: fetched only when the web CLI opens. */
function LazyWebCli(props: WebCliProps) {
  const [Page, setPage] = useState<FunctionComponent<WebCliProps> | null>(null);
  useEffect(() => {
    import("./pages/webcli.tsx").then((m) => setPage(() => m.WebCliPage));
  }, []);
  return Page ? <Page {...props} /> : <p aria-busy="true">Loading the terminal…</p>;
}

/** Hash routes (#/clusters/<uuid>): the server serves one index.html and never sees the route. */
function useRoute(): string[] {
  const read = () => location.hash.replace(/^#\/?/, "").split("/").filter(Boolean);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const onChange = () => setRoute(read());
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return route;
}

function App() {
  const [session, setSession] = useState<Session | null>(loadSession);
  const route = useRoute();
  const login = (s: Session | null) => {
    saveSession(s);
    setSession(s);
  };
  useEffect(() => whenSessionRefused(() => login(null)), []);
  useEffect(() => {
    const title = route[0] ? `${route[0][0]?.toUpperCase()}${route[0].slice(1)}` : "Clusters";
    document.title = session ? `${title} · Keelson` : "Log in · Keelson";
  }, [route, session]);
  if (!session) return <LoginPage onLogin={login} />;
  const logout = async () => {
    // Ends the session on the server too; the tab forgets the token either way.
    await call(session, "/keystone/v3/auth/tokens", {
      method: "DELETE",
      headers: { "x-subject-token": session.token },
    }).catch(() => {});
    login(null);
    location.hash = "";
  };
  const [page = "clusters", id] = route;
  const nav = [
    ["clusters", "Clusters"],
    ["hosts", "Hosts"],
    ["operations", "Operations"],
  ] as const;
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <strong class="brand">Keelson</strong>
        <nav aria-label="Main">
          {nav.map(([key, label]) => (
            <a
              key={key}
              href={`#/${key}`}
              aria-current={page === key || (key === "clusters" && page === "cluster") ? "page" : undefined}
            >
              {label}
            </a>
          ))}
        </nav>
        <span class="who">
          {session.userName} · {session.projectName}
        </span>
        <button type="button" onClick={logout}>
          Log out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        {page === "cluster" && id ? (
          <ClusterPage session={session} clusterId={id} />
        ) : page === "webcli" && id ? (
          <LazyWebCli session={session} clusterId={id} />
        ) : page === "hosts" ? (
          <HostsPage session={session} />
        ) : page === "operations" ? (
          <OperationsPage session={session} />
        ) : (
          <ClustersPage session={session} />
        )}
      </main>
    </>
  );
}

render(<App />, document.getElementById("app") as HTMLElement);
