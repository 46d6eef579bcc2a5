// Images (issue #18): the host's base image and the organization's imported ones. A unit starts
// from one; an imported one is deleted here. Imports are big archives: the CLI sends them.
import { useState } from "preact/hooks";
import { call, listImages } from "./api.js";
import { ConfirmButton, ErrorLine, Section, size, Time, useAction, usePoll } from "./ui.js";
import { CreateUnit } from "./units.js";

export function Images() {
  const list = usePoll((signal) => listImages(signal), []);
  const [busy, error, run] = useAction();
  const [using, setUsing] = useState("");
  const images = list.data;
  return (
    <Section title="Images">
      <p class="hint">
        Import a <code>docker save</code> or OCI image archive with <code>ums image import FILE.tar --name NAME</code>.
      </p>
      <ErrorLine error={list.error || error} />
      {using && (
        <div class="fork">
          <h3>New unit from image {using}</h3>
          <CreateUnit
            key={using}
            start={`image:${using}`}
            onCreated={(n) => {
              location.hash = `#/units/${encodeURIComponent(n)}`;
            }}
          />
        </div>
      )}
      {!images ? (
        <p class="loading">Loading…</p>
      ) : (
        <div class="table-wrap">
          <table class="images">
            <thead>
              <tr>
                <th>Name</th>
                <th>Kind</th>
                <th>Version</th>
                <th>Size</th>
                <th>User</th>
                <th>Working dir</th>
                <th>Created</th>
                <th>
                  <span class="sr">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {images.map((i) => (
                <tr key={i.name} data-image={i.name}>
                  <td>{i.name}</td>
                  <td>
                    <span class={i.kind === "base" ? "badge" : "label"}>{i.kind}</span>
                  </td>
                  <td>
                    <code>{i.version}</code>
                  </td>
                  <td>{size(i.bytes)}</td>
                  <td>{i.config.user.name}</td>
                  <td>{i.config.working_dir ?? <span class="hint">home</span>}</td>
                  <td>
                    <Time iso={i.created_at} />
                  </td>
                  <td class="actions">
                    <button type="button" onClick={() => setUsing(using === i.name ? "" : i.name)}>
                      New unit
                    </button>
                    {i.kind !== "base" && (
                      <ConfirmButton
                        label="Delete"
                        confirm={`Delete image ${i.name}?`}
                        danger
                        disabled={busy}
                        onConfirm={() =>
                          run(() => call("DELETE", `/v1/images/${encodeURIComponent(i.name)}`)).then(list.reload)
                        }
                      />
                    )}
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
