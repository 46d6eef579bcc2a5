// Services: list with state, create/edit, start/stop/restart, logs following live.
import { useEffect, useRef, useState } from "preact/hooks";
import { call, ndjson, type Service, unitPath } from "./api.js";
import { ConfirmButton, ErrorLine, message, Section, Status, useAction, usePoll } from "./ui.js";

interface Draft {
  name: string;
  cmd: string;
  args: string;
  needs: string;
  env: string;
  http_port: string;
}

const empty: Draft = { name: "", cmd: "", args: "", needs: "", env: "", http_port: "" };

function draftOf(s: Service): Draft {
  return {
    name: s.name,
    cmd: s.cmd,
    args: s.args.join("\n"),
    needs: s.needs.join(", "),
    env: Object.entries(s.env ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join("\n"),
    http_port: s.http_port ? String(s.http_port) : "",
  };
}

function Editor(props: { draft: Draft; unit: string; onDone: () => void; isNew: boolean }) {
  const [d, setD] = useState(props.draft);
  const [busy, error, run] = useAction();
  const field = (k: keyof Draft) => ({
    value: d[k],
    onInput: (e: { currentTarget: { value: string } }) => setD({ ...d, [k]: e.currentTarget.value }),
  });
  return (
    <form
      class="editor"
      aria-label={props.isNew ? "New service" : `Edit ${d.name}`}
      onSubmit={(e) => {
        e.preventDefault();
        const env: Record<string, string> = {};
        for (const line of d.env.split("\n")) {
          const i = line.indexOf("=");
          if (i > 0) env[line.slice(0, i).trim()] = line.slice(i + 1);
        }
        const body = {
          cmd: d.cmd,
          args: d.args.split("\n").filter((a) => a !== ""),
          needs: d.needs
            .split(/[\s,]+/)
            .map((n) => n.trim())
            .filter(Boolean),
          env,
          http_port: d.http_port ? Number(d.http_port) : null,
        };
        void run(() =>
          call("PUT", unitPath(props.unit, `/services/${encodeURIComponent(d.name)}`), { body }).then(props.onDone),
        );
      }}
    >
      <label>
        Name
        <input name="service-name" required disabled={!props.isNew} {...field("name")} />
      </label>
      <label>
        Command
        <input name="cmd" required placeholder="python3" {...field("cmd")} />
      </label>
      <label>
        Arguments (one a line)
        <textarea name="args" rows={3} {...field("args")} />
      </label>
      <label>
        Needs (services that start first)
        <input name="needs" {...field("needs")} />
      </label>
      <label>
        Environment (KEY=VALUE, one a line)
        <textarea name="env" rows={3} {...field("env")} />
      </label>
      <label>
        HTTP port
        <input name="http_port" type="number" min={1} max={65535} {...field("http_port")} />
      </label>
      <div class="toolbar">
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Saving…" : "Save and start"}
        </button>
        <button type="button" onClick={props.onDone}>
          Cancel
        </button>
      </div>
      <ErrorLine error={error} />
    </form>
  );
}

function Logs({ unit, service }: { unit: string; service: string }) {
  const [lines, setLines] = useState<{ t: string; text: string }[]>([]);
  const [error, setError] = useState("");
  const pre = useRef<HTMLPreElement>(null);
  useEffect(() => {
    const ctl = new AbortController();
    setLines([]);
    setError("");
    // Follows for an hour; the page reopens the stream if it ends while the panel is open.
    const follow = (): void => {
      ndjson(
        "GET",
        unitPath(unit, `/services/${encodeURIComponent(service)}/logs`),
        (e) => {
          const text =
            e.type === "stdout" || e.type === "stderr"
              ? String(e.data ?? "")
              : e.type === "complete"
                ? ""
                : `[${String(e.type)}${e.exit_code !== undefined ? ` ${String(e.exit_code)}` : ""}]`;
          if (text) setLines((l) => [...l.slice(-1999), { t: String(e.type), text }]);
        },
        { signal: ctl.signal, query: { lines: 500, duration: "1h" } },
      ).then(
        () => {
          if (!ctl.signal.aborted) follow();
        },
        (e: unknown) => {
          if (!ctl.signal.aborted) setError(message(e));
        },
      );
    };
    follow();
    return () => ctl.abort();
  }, [unit, service]);
  useEffect(() => {
    const el = pre.current;
    if (el) el.scrollTop = el.scrollHeight;
  });
  return (
    <section class="logs" aria-label={`Logs of ${service}`}>
      <h3>Logs of {service}</h3>
      <ErrorLine error={error} />
      <pre ref={pre}>
        {lines.map((l, i) => (
          <div key={i} class={l.t === "stderr" ? "stderr" : ""}>
            {l.text}
          </div>
        ))}
      </pre>
    </section>
  );
}

export function Services({ name }: { name: string }) {
  const list = usePoll((signal) => call<Service[]>("GET", unitPath(name, "/services"), { signal }), [name], 3000);
  const [editing, setEditing] = useState<{ draft: Draft; isNew: boolean } | null>(null);
  const [logs, setLogs] = useState("");
  const [busy, error, run] = useAction();
  const act = (s: string, what: "start" | "stop" | "restart") =>
    run(() => ndjson("POST", unitPath(name, `/services/${encodeURIComponent(s)}/${what}`), () => {})).then(list.reload);
  return (
    <Section
      title="Services"
      actions={
        <button type="button" onClick={() => setEditing({ draft: empty, isNew: true })}>
          New service
        </button>
      }
    >
      {editing && (
        <Editor
          unit={name}
          draft={editing.draft}
          isNew={editing.isNew}
          onDone={() => {
            setEditing(null);
            list.reload();
          }}
        />
      )}
      <ErrorLine error={list.error || error} />
      {list.data?.length === 0 && <p class="empty">No services.</p>}
      {list.data && list.data.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th>Name</th>
                <th>State</th>
                <th>Command</th>
                <th>Port</th>
                <th>
                  <span class="sr">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.data.map((s) => (
                <tr key={s.name} data-service={s.name}>
                  <td>{s.name}</td>
                  <td>
                    <Status status={s.state?.status ?? "stopped"} />
                    {s.state?.error && <span class="hint"> {s.state.error}</span>}
                  </td>
                  <td>
                    <code>{[s.cmd, ...s.args].join(" ")}</code>
                  </td>
                  <td>{s.http_port ?? ""}</td>
                  <td class="actions">
                    <button type="button" disabled={busy} onClick={() => act(s.name, "start")}>
                      Start
                    </button>
                    <button type="button" disabled={busy} onClick={() => act(s.name, "stop")}>
                      Stop
                    </button>
                    <button type="button" disabled={busy} onClick={() => act(s.name, "restart")}>
                      Restart
                    </button>
                    <button type="button" onClick={() => setLogs(logs === s.name ? "" : s.name)}>
                      Logs
                    </button>
                    <button type="button" onClick={() => setEditing({ draft: draftOf(s), isNew: false })}>
                      Edit
                    </button>
                    <ConfirmButton
                      label="Delete"
                      confirm={`Delete ${s.name}?`}
                      danger
                      onConfirm={() =>
                        run(() => call("DELETE", unitPath(name, `/services/${encodeURIComponent(s.name)}`))).then(
                          list.reload,
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
      {logs && <Logs unit={name} service={logs} />}
    </Section>
  );
}
