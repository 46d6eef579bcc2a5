// The ums console: sign-in with a token (exchanged for an HttpOnly session cookie), then the pages.
// Routing is by the URL's hash (#/units/web/files), so the server serves one index.html.
// xterm.js's style sheet is small: it comes with the main one (a lazy chunk's CSS would need a loader).
import "@xterm/xterm/css/xterm.css";
import "./style.css";
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { ApiError, call, type Session, setCsrf, setUnauthorizedHandler } from "./api.js";
import { Connectors } from "./connectors.js";
import { Images } from "./images.js";
import { Nodes } from "./nodes.js";
import { Templates } from "./templates.js";
import { UnitPage } from "./unit.js";
import { prefetchUnits, Units } from "./units.js";

function useHash(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const on = () => setHash(location.hash);
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return hash;
}

function SignIn({ onSession }: { onSession: (s: Session) => void }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  return (
    <main class="signin">
      <h1>ums console</h1>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setBusy(true);
          setError("");
          call<Session>("POST", "/v1/console/session", { body: { token: token.trim() } })
            .then(onSession, (err: unknown) =>
              setError(err instanceof ApiError && err.status === 401 ? "That token is not valid." : String(err)),
            )
            .finally(() => setBusy(false));
        }}
      >
        <label for="token">API token</label>
        <input
          id="token"
          name="token"
          type="password"
          autoComplete="off"
          required
          value={token}
          onInput={(e) => setToken(e.currentTarget.value)}
        />
        <button type="submit" class="primary" disabled={busy || !token.trim()}>
          Sign in
        </button>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <p class="hint">
          Create one with <code>ums token create --org NAME</code>. The token is exchanged for a session cookie and not
          kept by the page.
        </p>
      </form>
    </main>
  );
}

/** The main pages: the hash's first part (none: units), the link's text, and whether only admin tokens see it. */
const NAV = [
  ["", "Units", false],
  ["images", "Images", false],
  ["templates", "Templates", false],
  ["connectors", "Connectors", false],
  ["nodes", "Nodes", true],
] as const;

function App({ initial }: { initial: Session | null }) {
  const [session, setSession] = useState<Session | null>(initial);
  const hash = useHash();
  useEffect(() => {
    // A 401 may be a route that does not take the console's cookie (the unit proxy): the session
    // is over only when the server says so of the session itself.
    setUnauthorizedHandler(() => {
      fetch("/v1/console/session", { credentials: "same-origin" }).then(
        (res) => res.status === 401 && setSession(null),
        () => {},
      );
    });
  }, []);
  useEffect(() => {
    if (session) localStorage.setItem("ums-console", "1");
    else localStorage.removeItem("ums-console");
  }, [session]);
  if (session === null)
    return (
      <SignIn
        onSession={(s) => {
          setCsrf(s.csrf);
          setSession(s);
        }}
      />
    );
  const parts = hash
    .replace(/^#\/?/, "")
    .split("/")
    .filter(Boolean)
    .map((p) => decodeURIComponent(p));
  let page = <Units />;
  if (parts[0] === "connectors") page = <Connectors />;
  else if (parts[0] === "images") page = <Images />;
  else if (parts[0] === "templates") page = <Templates />;
  else if (parts[0] === "nodes") page = <Nodes admin={session.role === "admin"} />;
  else if (parts[0] === "units" && parts[1]) page = <UnitPage name={parts[1]} tab={parts[2] ?? "overview"} />;
  const current = NAV.find(([p]) => p === parts[0])?.[0] ?? "";
  const signOut = () => {
    void call("DELETE", "/v1/console/session").finally(() => {
      setCsrf("");
      setSession(null);
      location.hash = "";
    });
  };
  return (
    <>
      <header class="top">
        <a class="brand" href="#/">
          ums
        </a>
        <nav class="mainnav" aria-label="Main">
          {NAV.filter(([, , admin]) => !admin || session.role === "admin").map(([path, label]) => (
            <a key={path} href={`#/${path}`} aria-current={path === current ? "page" : undefined}>
              {label}
            </a>
          ))}
        </nav>
        <span class="org" title="Organization">
          {session.organization}
        </span>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main>{page}</main>
    </>
  );
}

// The session (and the units list, which most visits show first) before the first render. The
// cookie is HttpOnly: a mark in localStorage says whether asking is worth it (a page that signed in
// before), so a first visit makes no request that fails.
async function start(): Promise<Session | null> {
  if (localStorage.getItem("ums-console") !== "1") return null;
  const session = fetch("/v1/console/session", { credentials: "same-origin" }).then(
    async (res) => (res.ok ? ((await res.json()) as Session) : null),
    () => null,
  );
  const [s] = await Promise.all([session, prefetchUnits()]);
  if (s) setCsrf(s.csrf);
  return s;
}

const root = document.getElementById("app");
if (root) render(<App initial={await start()} />, root);
