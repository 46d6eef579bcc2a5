// The terminal: xterm.js over the exec websocket (TTY), in tabs; resize follows the window; the
// unit's sessions can be re-attached or killed.
//
// Keystroke latency: a key's bytes go out from a capturing keydown listener, before xterm.js sees
// the event, for the keys whose bytes never depend on the terminal's state (printable characters,
// Enter, Backspace, Tab, Escape); that listener then stops the event, so xterm.js's keydown,
// keypress and input handlers (which cost more than the echo's round trip on loopback) do not run
// in front of the echo arriving. Other keys, IME composition and pastes go through xterm.js.
import "./csp-styles.js";
import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";
import { useEffect, useRef, useState } from "preact/hooks";
import { type ExecSession, get, ndjson, unitPath } from "./api.js";
import { ConfirmButton, ErrorLine, Section, Time, useAction, usePoll } from "./ui.js";

interface Tab {
  key: number;
  /** Attach to this session instead of starting a shell. */
  attach?: number;
  title: string;
}

const FAST: Record<string, string> = { Enter: "\r", Backspace: "\x7f", Tab: "\t", Escape: "\x1b" };

function themeOf(dark: boolean) {
  return dark
    ? { background: "#16181d", foreground: "#e6e6e6", cursor: "#e6e6e6", selectionBackground: "#3a4a6b" }
    : { background: "#ffffff", foreground: "#1d1f24", cursor: "#1d1f24", selectionBackground: "#b8d0f5" };
}

function Term(props: { unit: string; tab: Tab; visible: boolean; onSession: (id: number) => void }) {
  const box = useRef<HTMLDivElement>(null);
  const fitRef = useRef<FitAddon | null>(null);
  const [status, setStatus] = useState("connecting…");
  const { unit, tab } = props;
  const onSession = useRef(props.onSession);
  onSession.current = props.onSession;
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const dark = matchMedia("(prefers-color-scheme: dark)");
    const term = new Terminal({
      cursorBlink: false,
      fontFamily: "ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace",
      fontSize: 14,
      scrollback: 5000,
      theme: themeOf(dark.matches),
    });
    const fit = new FitAddon();
    fitRef.current = fit;
    term.loadAddon(fit);
    term.open(el);
    fit.fit();
    const onScheme = () => {
      term.options.theme = themeOf(dark.matches);
    };
    dark.addEventListener("change", onScheme);

    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const q = new URLSearchParams({ tty: "true", stdin: "true", cols: String(term.cols), rows: String(term.rows) });
    q.append("cmd", "bash");
    q.append("cmd", "-l");
    const path =
      tab.attach === undefined ? unitPath(unit, `/exec?${q}`) : unitPath(unit, `/exec/${String(tab.attach)}`);
    const ws = new WebSocket(`${proto}//${location.host}${path}`);
    ws.binaryType = "arraybuffer";
    const enc = new TextEncoder();
    const send = (data: string | Uint8Array) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(typeof data === "string" ? enc.encode(data) : data);
    };
    ws.onopen = () => {
      setStatus("connected");
      ws.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
    };
    ws.onmessage = (ev: MessageEvent<ArrayBuffer | string>) => {
      if (typeof ev.data !== "string") return term.write(new Uint8Array(ev.data));
      let msg: { type?: string; session_id?: number; exit_code?: number };
      try {
        msg = JSON.parse(ev.data) as typeof msg;
      } catch {
        return;
      }
      if (msg.type === "session_info" && msg.session_id !== undefined) onSession.current(msg.session_id);
      else if (msg.type === "exit") setStatus(`exited (${String(msg.exit_code ?? "?")})`);
    };
    ws.onclose = (ev) => {
      setStatus((s) => (s.startsWith("exited") ? s : ev.code === 1000 ? "exited" : `disconnected (${ev.code})`));
    };
    ws.onerror = () => setStatus("connection failed");

    // The fast path for keys (see the top of the file).
    const onKey = (ev: KeyboardEvent) => {
      if (ev.isComposing || ev.ctrlKey || ev.altKey || ev.metaKey) return;
      const data = ev.key.length === 1 ? ev.key : FAST[ev.key];
      if (data === undefined || ws.readyState !== WebSocket.OPEN) return;
      // The bytes first; what xterm.js would have done for the key after them.
      ws.send(enc.encode(data));
      ev.preventDefault();
      ev.stopPropagation();
      if (term.hasSelection()) term.clearSelection();
      const b = term.buffer.active;
      if (b.viewportY !== b.baseY) term.scrollToBottom();
    };
    const onKeyUp = (ev: KeyboardEvent) => {
      if (ev.key.length === 1 || FAST[ev.key] !== undefined) ev.stopPropagation();
    };
    el.addEventListener("keydown", onKey, true);
    el.addEventListener("keyup", onKeyUp, true);
    const data = term.onData((d) => send(d));
    const binary = term.onBinary((d) => send(Uint8Array.from(d, (c) => c.charCodeAt(0))));
    const resize = term.onResize(({ cols, rows }) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", cols, rows }));
    });
    let frame = 0;
    const observer = new ResizeObserver(() => {
      cancelAnimationFrame(frame);
      frame = requestAnimationFrame(() => {
        if (el.offsetParent !== null) fit.fit();
      });
    });
    observer.observe(el);
    term.focus();
    return () => {
      observer.disconnect();
      cancelAnimationFrame(frame);
      dark.removeEventListener("change", onScheme);
      el.removeEventListener("keydown", onKey, true);
      el.removeEventListener("keyup", onKeyUp, true);
      data.dispose();
      binary.dispose();
      resize.dispose();
      ws.onclose = null;
      ws.close(1000);
      term.dispose();
    };
  }, []);
  useEffect(() => {
    if (props.visible) fitRef.current?.fit();
  }, [props.visible]);
  return (
    <div class="term-tab" hidden={!props.visible}>
      <p class="term-status" role="status">
        {status}
      </p>
      <div class="term" ref={box} data-tab={tab.key} />
    </div>
  );
}

let nextKey = 1;

export function TerminalPage({ name }: { name: string }) {
  const [tabs, setTabs] = useState<Tab[]>(() => [{ key: nextKey++, title: "shell" }]);
  const [active, setActive] = useState(tabs[0]?.key ?? 0);
  const [ids, setIds] = useState<Record<number, number>>({});
  const sessions = usePoll((signal) => get<ExecSession[]>(unitPath(name, "/exec"), { signal }), [name], 5000);
  const [busy, error, run] = useAction();
  const open = (t: Omit<Tab, "key">) => {
    const tab = { ...t, key: nextKey++ };
    setTabs((ts) => [...ts, tab]);
    setActive(tab.key);
  };
  // Closing a tab detaches: its session keeps running (a TTY's does until it exits) and can be
  // attached again from the list, or killed there.
  const close = (key: number) => {
    setIds(({ [key]: _, ...rest }) => rest);
    setTabs((ts) => {
      const rest = ts.filter((t) => t.key !== key);
      if (active === key) setActive(rest[rest.length - 1]?.key ?? 0);
      return rest;
    });
  };
  const attached = new Set(Object.values(ids));
  return (
    <Section title="Terminal">
      <div class="term-tabs" role="tablist" aria-label="Terminals">
        {tabs.map((t) => (
          <span key={t.key} class="term-tab-button">
            <button type="button" role="tab" aria-selected={t.key === active} onClick={() => setActive(t.key)}>
              {t.title}
              {ids[t.key] !== undefined && ` #${ids[t.key]}`}
            </button>
            <button
              type="button"
              aria-label={`Close ${t.title}`}
              title="Close the tab; its session keeps running"
              onClick={() => close(t.key)}
            >
              ✕
            </button>
          </span>
        ))}
        <button type="button" onClick={() => open({ title: "shell" })}>
          New tab
        </button>
      </div>
      {tabs.map((t) => (
        <Term
          key={t.key}
          unit={name}
          tab={t}
          visible={t.key === active}
          onSession={(id) => setIds((m) => ({ ...m, [t.key]: id }))}
        />
      ))}
      <h3>Sessions</h3>
      <ErrorLine error={sessions.error || error} />
      {sessions.data?.length === 0 && <p class="empty">No sessions.</p>}
      {sessions.data && sessions.data.length > 0 && (
        <div class="table-wrap">
          <table class="sessions">
            <thead>
              <tr>
                <th>Id</th>
                <th>Command</th>
                <th>Started</th>
                <th>Attached</th>
                <th>
                  <span class="sr">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {sessions.data.map((s) => (
                <tr key={s.id} data-session={s.id}>
                  <td>{s.id}</td>
                  <td>
                    <code>{s.command}</code>
                  </td>
                  <td>
                    <Time iso={s.created} />
                  </td>
                  <td>{s.is_active ? "yes" : "no"}</td>
                  <td class="actions">
                    {s.tty && !attached.has(s.id) && (
                      <button type="button" onClick={() => open({ title: `session ${s.id}`, attach: s.id })}>
                        Attach
                      </button>
                    )}
                    <ConfirmButton
                      label="Kill"
                      confirm={`Kill session ${s.id}?`}
                      danger
                      disabled={busy}
                      onConfirm={() =>
                        // SIGHUP, as a closed terminal sends (an interactive shell ignores SIGTERM);
                        // the server kills it outright if it is still there after 5 s.
                        run(() =>
                          ndjson("POST", unitPath(name, `/exec/${s.id}/kill`), () => {}, {
                            query: { signal: "SIGHUP", timeout: 5 },
                          }).then(sessions.reload),
                        )
                      }
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Section>
  );
}
