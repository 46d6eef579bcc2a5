// The units page: a live list (every 3 s), counts and limits, search by prefix, create, delete.
import { useState } from "preact/hooks";
import { call, get, type UnitList, unitPath } from "./api.js";
import { BASE, StartFrom, startBody } from "./start-from.js";
import { ConfirmButton, ErrorLine, Section, Status, Time, useAction, usePoll } from "./ui.js";

export const NAME = "^[a-z](?:-?[a-z0-9])*$";

/**
 * Creates a unit from an image or a template (`start`: `image:NAME` or `template:NAME`, default the
 * base image), or, with `from`, as a fork of a unit's checkpoint (which keeps that unit's image).
 */
export function CreateUnit(props: {
  onCreated: (name: string) => void;
  from?: { unit: string; checkpoint: string };
  start?: string;
}) {
  const [name, setName] = useState("");
  const [start, setStart] = useState(props.start ?? BASE);
  const [pub, setPub] = useState(false);
  const [fromUnit, setFromUnit] = useState(props.from?.unit ?? "");
  const [fromCheckpoint, setFromCheckpoint] = useState(props.from?.checkpoint ?? "");
  const [busy, error, run] = useAction();
  const forking = Boolean(fromUnit && fromCheckpoint);
  return (
    <form
      class="inline-form"
      aria-label="Create a unit"
      onSubmit={(e) => {
        e.preventDefault();
        const body: Record<string, unknown> = { name };
        if (pub) body.url_settings = { auth: "public" };
        if (forking) body.from = { unit: fromUnit, checkpoint: fromCheckpoint };
        else Object.assign(body, startBody(start));
        void run(async () => {
          await call("POST", "/v1/units", { body });
          setName("");
          props.onCreated(name);
        });
      }}
    >
      <label>
        Name
        <input
          name="name"
          required
          maxLength={54}
          pattern={NAME}
          title="lowercase letters, digits and single hyphens, starting with a letter"
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
        />
      </label>
      {!props.from && <StartFrom value={start} onChange={setStart} disabled={forking} />}
      <label class="check">
        <input type="checkbox" name="public" checked={pub} onChange={(e) => setPub(e.currentTarget.checked)} /> Public
        URL
      </label>
      <label>
        From unit
        <input name="from-unit" value={fromUnit} onInput={(e) => setFromUnit(e.currentTarget.value)} />
      </label>
      <label>
        Checkpoint
        <input
          name="from-checkpoint"
          placeholder="v1"
          size={5}
          value={fromCheckpoint}
          onInput={(e) => setFromCheckpoint(e.currentTarget.value)}
        />
      </label>
      <button type="submit" class="primary" disabled={busy}>
        {busy ? "Creating…" : "Create"}
      </button>
      <ErrorLine error={error} />
    </form>
  );
}

const listUnits = (prefix: string, signal?: AbortSignal) =>
  get<UnitList>("/v1/units", { signal, query: { prefix: prefix || undefined, max_results: 200 } });

/**
 * The first page, asked for at start-up alongside the session (main.tsx), so that the table is in
 * the first render rather than after a round trip that starts once the page has rendered.
 */
let early: UnitList | undefined;
export async function prefetchUnits(): Promise<void> {
  if (location.hash.replace(/^#\/?/, "") !== "") return;
  early = await listUnits("").catch(() => undefined);
}

export function Units() {
  const [prefix, setPrefix] = useState("");
  const list = usePoll((signal) => listUnits(prefix, signal), [prefix], 3000, early);
  early = undefined;
  const [, delError, run] = useAction();
  // The form (and its lists of images and templates) is made when it is opened.
  const [creating, setCreating] = useState(false);
  const d = list.data;
  return (
    <Section
      title="Units"
      actions={
        d && (
          <p class="counts">
            <span>
              running {d.running}
              {d.running_limit !== undefined && ` / ${d.running_limit}`}
            </span>
            <span>
              warm {d.warm}
              {d.warm_limit !== undefined && ` / ${d.warm_limit}`}
            </span>
            <span>cold {d.cold}</span>
          </p>
        )
      }
    >
      <div class="toolbar">
        <input
          type="search"
          aria-label="Search by name prefix"
          placeholder="Search by prefix"
          value={prefix}
          onInput={(e) => setPrefix(e.currentTarget.value.toLowerCase())}
        />
      </div>
      <details class="create" onToggle={(e) => setCreating(e.currentTarget.open)}>
        <summary>Create a unit</summary>
        {creating && <CreateUnit onCreated={() => list.reload()} />}
      </details>
      <ErrorLine error={list.error || delError} />
      {!d ? (
        <p class="loading">Loading…</p>
      ) : d.sprites.length === 0 ? (
        <p class="empty">{prefix ? "No unit has that prefix." : "No units yet."}</p>
      ) : (
        <div class="table-wrap">
          <table class="units">
            <thead>
              <tr>
                <th>Name</th>
                <th>Status</th>
                <th>Labels</th>
                <th>Last running</th>
                <th>
                  <span class="sr">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {d.sprites.map((u) => (
                <tr key={u.name} data-unit={u.name}>
                  <td>
                    <a href={`#/units/${encodeURIComponent(u.name)}`}>{u.name}</a>
                  </td>
                  <td>
                    <Status status={u.status} />
                  </td>
                  <td>
                    {(u.labels ?? []).map((l) => (
                      <span class="label" key={l}>
                        {l}
                      </span>
                    ))}
                  </td>
                  <td>
                    <Time iso={u.last_running_at} />
                  </td>
                  <td class="actions">
                    <ConfirmButton
                      label="Delete"
                      confirm={`Delete ${u.name} and its files?`}
                      danger
                      onConfirm={() => run(() => call("DELETE", unitPath(u.name)).then(list.reload))}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {d.has_more && <p class="hint">Showing the first {d.sprites.length}; narrow the search to see others.</p>}
        </div>
      )}
    </Section>
  );
}
