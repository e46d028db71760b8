/**
 * The login session, kept for this tab only (sessionStorage): closing the tab forgets the token,
 * and no other tab or later visit sees it.
 */
export interface Session {
  token: string;
  projectId: string;
  projectName: string;
  userName: string;
  expiresAt: string;
}

const KEY = "keelson.session";

export function loadSession(): Session | null {
  const raw = sessionStorage.getItem(KEY);
  if (!raw) return null;
  try {
    const session = JSON.parse(raw) as Session;
    return Date.parse(session.expiresAt) > Date.now() ? session : null;
  } catch {
    return null;
  }
}

export function saveSession(session: Session | null): void {
  if (session) sessionStorage.setItem(KEY, JSON.stringify(session));
  else sessionStorage.removeItem(KEY);
}
