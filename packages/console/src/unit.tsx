// A unit's pages: overview, terminal, files, services, checkpoints, network.
import { lazy, Suspense } from "preact/compat";
import { useState } from "preact/hooks";
import { type Checkpoint, call, get, type NetworkLog, type NetworkRule, ndjson, type Unit, unitPath } from "./api.js";
import { Files } from "./files.js";
import { Services } from "./services.js";
import { PublishTemplate } from "./templates.js";
import { ConfirmButton, ErrorLine, Section, Status, size, Time, useAction, usePoll } from "./ui.js";
import { CreateUnit } from "./units.js";

// xterm.js is most of the console's weight: it loads when the terminal is opened.
const Terminal = lazy(() => import("./terminal.js").then((m) => m.TerminalPage));

const TABS = ["overview", "terminal", "files", "services", "checkpoints", "network"] as const;

export function UnitPage({ name, tab }: { name: string; tab: string }) {
  const unit = usePoll((signal) => get<Unit>(unitPath(name), { signal }), [name], 3000);
  const u = unit.data;
  return (
    <>
      <header class="unit-head">
        <h1>
          <a href="#/">Units</a> / {name}
        </h1>
        {u && <Status status={u.status} />}
      </header>
      <nav class="tabs" aria-label="Unit">
        {TABS.map((t) => (
          <a key={t} href={`#/units/${encodeURIComponent(name)}/${t}`} aria-current={t === tab ? "page" : undefined}>
            {t[0]?.toUpperCase() + t.slice(1)}
          </a>
        ))}
      </nav>
      <ErrorLine error={unit.error} />
      {tab === "overview" && u && <Overview unit={u} />}
      {tab === "terminal" && (
        <Suspense fallback={<p class="loading">Loading the terminal…</p>}>
          <Terminal name={name} />
        </Suspense>
      )}
      {tab === "files" && <Files name={name} />}
      {tab === "services" && <Services name={name} />}
      {tab === "checkpoints" && <Checkpoints name={name} />}
      {tab === "network" && <Network name={name} />}
    </>
  );
}

interface Usage {
  samples: {
    at: string;
    cpu_cores: number;
    memory_bytes: number;
    memory_limit_bytes?: number;
    disk_bytes: number;
    disk_limit_bytes?: number;
    net_rx_bytes_per_second: number;
    net_tx_bytes_per_second: number;
    processes: number;
  }[];
}

/** Whether this server has GET …/metrics: unknown until it was asked once. */
let usageSupported: boolean | undefined;

interface Health {
  status: string;
  reason: string | null;
  checked_at: string;
  elapsed: number;
}

function Overview({ unit }: { unit: Unit }) {
  const health = usePoll((signal) => get<Health>(unitPath(unit.name, "/check"), { signal }), [unit.name]);
  // Resource use, where the server has it (GET …/metrics, issue #17). A server without that route
  // answers through the unit proxy instead (a 404 or 502, or the unit's own app): anything but the
  // usage document hides the section, and only a server that answered with it is asked again.
  const metrics = usePoll(
    (signal) =>
      usageSupported === false
        ? Promise.resolve(null)
        : fetch(unitPath(unit.name, "/metrics"), { signal, credentials: "same-origin" })
            .then((res) => (res.ok ? (res.json() as Promise<Usage>) : null))
            .then(
              (u) => {
                usageSupported = Array.isArray(u?.samples);
                return usageSupported ? u : null;
              },
              () => {
                usageSupported = false;
                return null;
              },
            ),
    [unit.name],
    10_000,
  );
  const last = metrics.data?.samples.at(-1);
  const [copied, setCopied] = useState(false);
  return (
    <Section title="Overview">
      <dl class="facts">
        <dt>Status</dt>
        <dd>
          <Status status={unit.status} />
        </dd>
        <dt>URL</dt>
        <dd class="url">
          <a href={unit.url} target="_blank" rel="noopener noreferrer">
            {unit.url}
          </a>{" "}
          <button
            type="button"
            onClick={() =>
              navigator.clipboard.writeText(unit.url).then(
                () => setCopied(true),
                () => setCopied(false),
              )
            }
          >
            {copied ? "Copied" : "Copy"}
          </button>
          <span class="hint"> {unit.url_settings?.auth === "public" ? "public" : "signed-in only"}</span>
        </dd>
        <dt>Health</dt>
        <dd>
          {health.data ? (
            <>
              <Status status={health.data.status} /> {health.data.reason ?? ""}{" "}
              <button type="button" onClick={health.reload}>
                Check
              </button>
            </>
          ) : (
            (health.error ?? "…")
          )}
        </dd>
        <dt>Created</dt>
        <dd>
          <Time iso={unit.created_at} />
        </dd>
        <dt>Updated</dt>
        <dd>
          <Time iso={unit.updated_at} />
        </dd>
        <dt>Last running</dt>
        <dd>
          <Time iso={unit.last_running_at} />
        </dd>
        <dt>Labels</dt>
        <dd>{(unit.labels ?? []).join(", ") || "none"}</dd>
        {unit.node && (
          <>
            <dt>Node</dt>
            <dd>{unit.node}</dd>
          </>
        )}
        {unit.config && (
          <>
            <dt>Limits</dt>
            <dd>
              {[
                unit.config.cpus !== undefined && `${unit.config.cpus} CPU`,
                unit.config.ram_mb !== undefined && `${unit.config.ram_mb} MiB memory`,
                unit.config.storage_gb !== undefined && `${unit.config.storage_gb} GiB disk`,
              ]
                .filter(Boolean)
                .join(", ") || "defaults"}
            </dd>
          </>
        )}
      </dl>
      {last && (
        <>
          <h3>Resource use</h3>
          <dl class="facts">
            <dt>CPU</dt>
            <dd>{last.cpu_cores.toFixed(2)} cores</dd>
            <dt>Memory</dt>
            <dd>
              {size(last.memory_bytes)}
              {last.memory_limit_bytes ? ` of ${size(last.memory_limit_bytes)}` : ""}
            </dd>
            <dt>Disk</dt>
            <dd>
              {size(last.disk_bytes)}
              {last.disk_limit_bytes ? ` of ${size(last.disk_limit_bytes)}` : ""}
            </dd>
            <dt>Network</dt>
            <dd>
              in {size(last.net_rx_bytes_per_second)}/s, out {size(last.net_tx_bytes_per_second)}/s
            </dd>
            <dt>Processes</dt>
            <dd>{last.processes}</dd>
            <dt>Sampled</dt>
            <dd>
              <Time iso={last.at} />
            </dd>
          </dl>
        </>
      )}
    </Section>
  );
}

function Checkpoints({ name }: { name: string }) {
  const list = usePoll(
    (signal) => get<Checkpoint[]>(unitPath(name, "/checkpoints"), { signal, query: { includeAuto: true } }),
    [name],
  );
  const [comment, setComment] = useState("");
  const [progress, setProgress] = useState<string[]>([]);
  const [busy, error, run] = useAction();
  const [forking, setForking] = useState("");
  const [publishing, setPublishing] = useState("");
  const [published, setPublished] = useState("");
  const stream = (path: string, body?: unknown) =>
    run(async () => {
      setProgress([]);
      await ndjson("POST", unitPath(name, path), (e) => setProgress((p) => [...p, String(e.data ?? e.type)]), {
        body,
      });
      list.reload();
    });
  const cps = [...(list.data ?? [])].reverse();
  return (
    <Section title="Checkpoints">
      <form
        class="inline-form"
        aria-label="Create a checkpoint"
        onSubmit={(e) => {
          e.preventDefault();
          void stream("/checkpoint", { comment }).then(() => setComment(""));
        }}
      >
        <label>
          Comment
          <input name="comment" maxLength={1000} value={comment} onInput={(e) => setComment(e.currentTarget.value)} />
        </label>
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Working…" : "Create checkpoint"}
        </button>
      </form>
      {progress.length > 0 && (
        <ol class="progress" aria-live="polite">
          {progress.map((p, i) => (
            <li key={i}>{p}</li>
          ))}
        </ol>
      )}
      <ErrorLine error={list.error || error} />
      {forking && (
        <div class="fork">
          <h3>Fork {forking} into a new unit</h3>
          <CreateUnit
            from={{ unit: name, checkpoint: forking }}
            onCreated={(n) => {
              setForking("");
              location.hash = `#/units/${encodeURIComponent(n)}`;
            }}
          />
        </div>
      )}
      {publishing && (
        <div class="fork">
          <h3>Publish {publishing} as a template</h3>
          <PublishTemplate
            key={publishing}
            unit={name}
            checkpoint={publishing}
            onPublished={(t) => {
              setPublishing("");
              setPublished(t);
            }}
          />
        </div>
      )}
      {published && (
        <p role="status">
          Published template <a href="#/templates">{published}</a>.
        </p>
      )}
      <ol class="timeline" aria-label="Checkpoint timeline">
        {cps.map((c) => (
          <li key={c.id} class={c.active ? "active" : ""} data-checkpoint={c.id}>
            <div class="cp-head">
              <strong>{c.id}</strong>
              {c.active && <span class="badge">active</span>}
              {c.is_auto && <span class="badge auto">automatic backup</span>}
              {c.health && <span class="badge bad">{c.health}</span>}
              <Time iso={c.create_time} />
              {c.source_id && <span class="hint">from {c.source_id}</span>}
            </div>
            {c.comment && <p class="comment">{c.comment}</p>}
            <div class="actions">
              <ConfirmButton
                label="Restore"
                confirm={`Restore ${c.id}? The current state is saved first.`}
                disabled={busy}
                onConfirm={() => stream(`/checkpoints/${encodeURIComponent(c.id)}/restore`)}
              />
              <button
                type="button"
                onClick={() => {
                  setPublishing("");
                  setForking(c.id);
                }}
              >
                Fork
              </button>
              <button
                type="button"
                onClick={() => {
                  setForking("");
                  setPublished("");
                  setPublishing(c.id);
                }}
              >
                Publish as template
              </button>
              {!c.active && (
                <ConfirmButton
                  label="Delete"
                  confirm={`Delete ${c.id}?`}
                  danger
                  disabled={busy}
                  onConfirm={() =>
                    run(() => call("DELETE", unitPath(name, `/checkpoints/${encodeURIComponent(c.id)}`))).then(
                      list.reload,
                    )
                  }
                />
              )}
            </div>
          </li>
        ))}
      </ol>
    </Section>
  );
}

const PRESETS = ["defaults", "github", "npm", "pypi", "debian", "docker", "ai", "go", "rust", "ruby"];

function Network({ name }: { name: string }) {
  const policy = usePoll(
    (signal) => get<{ rules: NetworkRule[] }>(unitPath(name, "/policy/network"), { signal }),
    [name],
  );
  const log = usePoll((signal) => get<NetworkLog>(unitPath(name, "/policy/network/log"), { signal }), [name], 5000);
  const [edited, setEdited] = useState<NetworkRule[] | null>(null);
  const [busy, error, run] = useAction();
  const [saved, setSaved] = useState(false);
  const rules = edited ?? policy.data?.rules ?? [];
  const edit = (next: NetworkRule[]) => {
    setSaved(false);
    setEdited(next);
  };
  const set = (i: number, r: NetworkRule) => edit(rules.map((x, j) => (j === i ? r : x)));
  return (
    <>
      <Section title="Network policy">
        <p class="hint">
          An exact name beats a wildcard; with any rule present, a name no rule allows is denied. An empty list leaves
          the network open.
        </p>
        <ErrorLine error={policy.error || error} />
        <ol class="rules" aria-label="Rules">
          {rules.map((r, i) => (
            <li key={i} class="rule">
              {r.include !== undefined ? (
                <>
                  <span>include preset</span>
                  <select
                    aria-label="Preset"
                    value={r.include}
                    onChange={(e) => set(i, { include: e.currentTarget.value })}
                  >
                    {PRESETS.map((p) => (
                      <option key={p}>{p}</option>
                    ))}
                  </select>
                </>
              ) : (
                <>
                  <select
                    aria-label="Action"
                    value={r.action ?? "allow"}
                    onChange={(e) => set(i, { ...r, action: e.currentTarget.value })}
                  >
                    <option>allow</option>
                    <option>deny</option>
                  </select>
                  <input
                    aria-label="Domain"
                    placeholder="api.example.com or *.example.com"
                    value={r.domain ?? ""}
                    onInput={(e) => set(i, { ...r, domain: e.currentTarget.value })}
                  />
                </>
              )}
              <button type="button" aria-label="Remove rule" onClick={() => edit(rules.filter((_, j) => j !== i))}>
                ✕
              </button>
            </li>
          ))}
        </ol>
        <div class="toolbar">
          <button type="button" onClick={() => edit([...rules, { action: "allow", domain: "" }])}>
            Add rule
          </button>
          <button type="button" onClick={() => edit([...rules, { include: "defaults" }])}>
            Add preset
          </button>
          <button
            type="button"
            class="primary"
            disabled={busy || edited === null}
            onClick={() =>
              run(async () => {
                await call("POST", unitPath(name, "/policy/network"), { body: { rules } });
                setEdited(null);
                setSaved(true);
                policy.reload();
              })
            }
          >
            Save policy
          </button>
          {edited !== null && (
            <button type="button" onClick={() => setEdited(null)}>
              Discard
            </button>
          )}
          {saved && <span role="status">Saved.</span>}
        </div>
      </Section>
      <Section title="Recent decisions">
        <ErrorLine error={log.error} />
        {log.data && (
          <>
            <p class="counts">
              <span>denied lookups {log.data.denied_lookups}</span>
              <span>dropped packets {log.data.dropped_packets}</span>
            </p>
            {log.data.decisions.length === 0 ? (
              <p class="empty">No lookups yet.</p>
            ) : (
              <div class="table-wrap">
                <table>
                  <thead>
                    <tr>
                      <th>When</th>
                      <th>Name</th>
                      <th>Type</th>
                      <th>Verdict</th>
                      <th>Rule</th>
                    </tr>
                  </thead>
                  <tbody>
                    {[...log.data.decisions].reverse().map((d, i) => (
                      <tr key={i}>
                        <td>
                          <Time iso={d.time} />
                        </td>
                        <td>{d.name}</td>
                        <td>{d.type}</td>
                        <td>
                          <Status status={d.verdict} />
                        </td>
                        <td>{d.rule ?? ""}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </>
        )}
      </Section>
    </>
  );
}
