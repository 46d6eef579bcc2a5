// Connectors: list, add an API key, start an OAuth flow, edit the access policy, delete.
import { useState } from "preact/hooks";
import { type AccessPolicy, type Connection, call, get, type Provider } from "./api.js";
import { ConfirmButton, ErrorLine, Section, useAction, usePoll } from "./ui.js";

const lines = (s: string) =>
  s
    .split(/[\n,]+/)
    .map((x) => x.trim())
    .filter(Boolean);

function PolicyEditor(props: { conn: Connection; onDone: () => void }) {
  const p = props.conn.access_policy ?? {};
  const [allowAll, setAllowAll] = useState(p.allow_all ?? false);
  const [prefix, setPrefix] = useState(p.name_prefix ?? "");
  const [labels, setLabels] = useState((p.sprite_labels ?? []).join(", "));
  const [allowed, setAllowed] = useState((p.allowed_endpoints ?? []).join("\n"));
  const [blocked, setBlocked] = useState((p.blocked_endpoints ?? []).join("\n"));
  const [busy, error, run] = useAction();
  return (
    <form
      class="editor"
      aria-label={`Access policy of ${props.conn.id}`}
      onSubmit={(e) => {
        e.preventDefault();
        const policy: AccessPolicy = { allow_all: allowAll };
        if (prefix) policy.name_prefix = prefix;
        if (labels.trim()) policy.sprite_labels = lines(labels);
        if (allowed.trim()) policy.allowed_endpoints = lines(allowed);
        if (blocked.trim()) policy.blocked_endpoints = lines(blocked);
        void run(() =>
          call("PUT", `/v1/oauth/connections/${encodeURIComponent(props.conn.id)}`, {
            body: { access_policy: policy },
          }).then(props.onDone),
        );
      }}
    >
      <label class="check">
        <input type="checkbox" checked={allowAll} onChange={(e) => setAllowAll(e.currentTarget.checked)} /> Every unit
        may use it
      </label>
      <label>
        Units whose name starts with
        <input value={prefix} onInput={(e) => setPrefix(e.currentTarget.value)} />
      </label>
      <label>
        Units with these labels
        <input value={labels} onInput={(e) => setLabels(e.currentTarget.value)} />
      </label>
      <label>
        Allowed endpoints (one a line, e.g. /repos/*)
        <textarea rows={3} value={allowed} onInput={(e) => setAllowed(e.currentTarget.value)} />
      </label>
      <label>
        Blocked endpoints
        <textarea rows={3} value={blocked} onInput={(e) => setBlocked(e.currentTarget.value)} />
      </label>
      <div class="toolbar">
        <button type="submit" class="primary" disabled={busy}>
          Save policy
        </button>
        <button type="button" onClick={props.onDone}>
          Cancel
        </button>
      </div>
      <ErrorLine error={error} />
    </form>
  );
}

export function Connectors() {
  const list = usePoll((signal) => get<{ connections: Connection[] }>("/v1/oauth/connections", { signal }), []);
  const providers = usePoll((signal) => get<{ providers: Provider[] }>("/v1/oauth/providers", { signal }), []);
  const [provider, setProvider] = useState("");
  const [key, setKey] = useState("");
  const [baseUrl, setBaseUrl] = useState("");
  const [account, setAccount] = useState("");
  const [editing, setEditing] = useState("");
  const [busy, error, run] = useAction();
  const chosen = providers.data?.providers.find((p) => p.key === provider);
  return (
    <Section title="Connectors">
      <form
        class="inline-form"
        aria-label="Add a connector"
        onSubmit={(e) => {
          e.preventDefault();
          const body: Record<string, unknown> = { provider, api_key: key };
          if (baseUrl) body.base_api_url = baseUrl;
          if (account) body.provider_account_name = account;
          void run(async () => {
            await call("POST", "/v1/oauth/connections/api_key", { body });
            setKey("");
            list.reload();
          });
        }}
      >
        <label>
          Provider
          <select name="provider" required value={provider} onChange={(e) => setProvider(e.currentTarget.value)}>
            <option value="">Choose…</option>
            {providers.data?.providers.map((p) => (
              <option key={p.key} value={p.key}>
                {p.display_name}
              </option>
            ))}
          </select>
        </label>
        <label>
          API key
          <input
            name="api_key"
            type="password"
            autoComplete="off"
            value={key}
            onInput={(e) => setKey(e.currentTarget.value)}
          />
        </label>
        {chosen?.base_api_url_required && (
          <label>
            API base URL
            <input name="base_api_url" required value={baseUrl} onInput={(e) => setBaseUrl(e.currentTarget.value)} />
          </label>
        )}
        <label>
          Account name
          <input name="account" value={account} onInput={(e) => setAccount(e.currentTarget.value)} />
        </label>
        <button type="submit" class="primary" disabled={busy || !provider || !key}>
          Add API key
        </button>
        {chosen?.oauth && (
          <button
            type="button"
            disabled={busy}
            onClick={() =>
              run(async () => {
                const r = await get<{ authorize_url: string }>(`/v1/oauth/${encodeURIComponent(provider)}/authorize`);
                location.assign(r.authorize_url);
              })
            }
          >
            Connect with OAuth
          </button>
        )}
      </form>
      <ErrorLine error={list.error || providers.error || error} />
      {list.data?.connections.length === 0 && <p class="empty">No connectors.</p>}
      {list.data && list.data.connections.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th>Provider</th>
                <th>Account</th>
                <th>Type</th>
                <th>Who may use it</th>
                <th>
                  <span class="sr">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.data.connections.map((c) => (
                <tr key={c.id} data-connection={c.id}>
                  <td>{c.provider}</td>
                  <td>{c.provider_account_name || c.provider_account_id}</td>
                  <td>{c.connection_type ?? ""}</td>
                  <td>
                    {c.access_policy?.allow_all
                      ? "every unit"
                      : [
                          c.access_policy?.name_prefix && `names ${c.access_policy.name_prefix}*`,
                          c.access_policy?.sprite_labels?.length &&
                            `labels ${c.access_policy.sprite_labels.join(", ")}`,
                        ]
                          .filter(Boolean)
                          .join("; ") || "no unit"}
                  </td>
                  <td class="actions">
                    <button type="button" onClick={() => setEditing(editing === c.id ? "" : c.id)}>
                      Edit policy
                    </button>
                    <ConfirmButton
                      label="Delete"
                      confirm={`Delete ${c.provider} connector?`}
                      danger
                      onConfirm={() =>
                        run(() => call("DELETE", `/v1/oauth/connections/${encodeURIComponent(c.id)}`)).then(list.reload)
                      }
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {list.data?.connections
        .filter((c) => c.id === editing)
        .map((c) => (
          <PolicyEditor
            key={c.id}
            conn={c}
            onDone={() => {
              setEditing("");
              list.reload();
            }}
          />
        ))}
    </Section>
  );
}
