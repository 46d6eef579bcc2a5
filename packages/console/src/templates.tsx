// Templates (issue #18): a unit's checkpoint (files, services, policies) published for the
// organization. Listed and deleted here; published from a unit's checkpoints (PublishTemplate).
import { useState } from "preact/hooks";
import { call, listTemplates } from "./api.js";
import { ConfirmButton, ErrorLine, Section, Time, useAction, usePoll } from "./ui.js";
import { CreateUnit, NAME } from "./units.js";

export function Templates() {
  const list = usePoll((signal) => listTemplates(signal), []);
  const [busy, error, run] = useAction();
  const [using, setUsing] = useState("");
  const templates = list.data;
  return (
    <Section title="Templates">
      <p class="hint">
        Publish one from a unit's checkpoint (its Checkpoints tab). A unit made from a template starts with a copy of
        its files, services and policies; deleting the template leaves such units as they are.
      </p>
      <ErrorLine error={list.error || error} />
      {using && (
        <div class="fork">
          <h3>New unit from template {using}</h3>
          <CreateUnit
            key={using}
            start={`template:${using}`}
            onCreated={(n) => {
              location.hash = `#/units/${encodeURIComponent(n)}`;
            }}
          />
        </div>
      )}
      {!templates ? (
        <p class="loading">Loading…</p>
      ) : templates.length === 0 ? (
        <p class="empty">No templates yet.</p>
      ) : (
        <div class="table-wrap">
          <table class="templates">
            <thead>
              <tr>
                <th>Name</th>
                <th>Description</th>
                <th>Published from</th>
                <th>Created</th>
                <th>
                  <span class="sr">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {templates.map((t) => (
                <tr key={t.name} data-template={t.name}>
                  <td>{t.name}</td>
                  <td>{t.description}</td>
                  <td>
                    <a href={`#/units/${encodeURIComponent(t.source.unit)}/checkpoints`}>{t.source.unit}</a>{" "}
                    {t.source.checkpoint}
                  </td>
                  <td>
                    <Time iso={t.created_at} />
                  </td>
                  <td class="actions">
                    <button type="button" onClick={() => setUsing(using === t.name ? "" : t.name)}>
                      New unit
                    </button>
                    <ConfirmButton
                      label="Delete"
                      confirm={`Delete template ${t.name}?`}
                      danger
                      disabled={busy}
                      onConfirm={() =>
                        run(() => call("DELETE", `/v1/templates/${encodeURIComponent(t.name)}`)).then(list.reload)
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

/** Publishes a unit's checkpoint as a template (`POST /v1/templates`). */
export function PublishTemplate(props: { unit: string; checkpoint: string; onPublished: (name: string) => void }) {
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [busy, error, run] = useAction();
  return (
    <form
      class="inline-form"
      aria-label="Publish a template"
      onSubmit={(e) => {
        e.preventDefault();
        const body: Record<string, unknown> = { name, from: { unit: props.unit, checkpoint: props.checkpoint } };
        if (description) body.description = description;
        void run(async () => {
          await call("POST", "/v1/templates", { body });
          props.onPublished(name);
        });
      }}
    >
      <label>
        Template name
        <input
          name="template-name"
          required
          maxLength={54}
          pattern={NAME}
          title="lowercase letters, digits and single hyphens, starting with a letter"
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
        />
      </label>
      <label>
        Description
        <input
          name="template-description"
          maxLength={1000}
          value={description}
          onInput={(e) => setDescription(e.currentTarget.value)}
        />
      </label>
      <button type="submit" class="primary" disabled={busy}>
        {busy ? "Publishing…" : "Publish"}
      </button>
      <ErrorLine error={error} />
    </form>
  );
}
