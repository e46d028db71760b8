import { useState } from "preact/hooks";
import { ApiError, request } from "../api.ts";
import type { Session } from "../session.ts";
import { ErrorNote, Field } from "../ui.tsx";

interface KeystoneToken {
  token: { expires_at: string; user: { name: string }; project: { id: string; name: string } };
}

/** The Keystone way: user, password and project; the token comes back in X-Subject-Token. */
export function LoginPage({ onLogin }: { onLogin: (session: Session) => void }) {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    const domain = { id: "default" };
    setBusy(true);
    setError(null);
    try {
      const res = await request(null, "/keystone/v3/auth/tokens", {
        method: "POST",
        body: {
          auth: {
            identity: {
              methods: ["password"],
              password: { user: { name: form.get("user"), password: form.get("password"), domain } },
            },
            scope: { project: { name: form.get("project"), domain } },
          },
        },
      });
      const token = res.headers.get("x-subject-token");
      if (!token) throw new ApiError(res.status, "no_token", "the login answer carried no X-Subject-Token header");
      const body = (await res.json()) as KeystoneToken;
      onLogin({
        token,
        projectId: body.token.project.id,
        projectName: body.token.project.name,
        userName: body.token.user.name,
        expiresAt: body.token.expires_at,
      });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" class="login">
      <h1>Keelson console</h1>
      <form onSubmit={submit} aria-describedby="login-note">
        <p id="login-note">Log in with your user, password and project. The token is kept for this tab only.</p>
        <Field id="login-user" label="User">
          <input id="login-user" name="user" autocomplete="username" required />
        </Field>
        <Field id="login-password" label="Password">
          <input id="login-password" name="password" type="password" autocomplete="current-password" required />
        </Field>
        <Field id="login-project" label="Project">
          <input id="login-project" name="project" value="default" required />
        </Field>
        <ErrorNote error={error} />
        <button type="submit" disabled={busy}>
          {busy ? "Logging in…" : "Log in"}
        </button>
      </form>
    </main>
  );
}
