// Nodes (issue #15): the hosts that run units, for admin tokens: up or down by their heartbeat, the
// operator's state, their units and what they have free, as `ums node list` shows them. Refreshed
// every 5 s (a heartbeat's interval). Cordoning and draining stay on the host (`ums node`).
import { listNodes, type Node } from "./api.js";
import { ErrorLine, Section, size, usePoll } from "./ui.js";

/** Seconds as `4 s ago`, `3 min ago`, … (the server's count: the browser's clock may differ from it). */
function secondsAgo(s: number): string {
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

/** The status badge's colour: down, up but taking no new units, up. */
const tone = (n: Node) => (!n.up ? "down" : n.state === "active" ? "up" : "cordoned");

export function Nodes({ admin }: { admin: boolean }) {
  if (!admin)
    return (
      <Section title="Nodes">
        <p class="empty">Nodes are shown to admin tokens only: sign in with an admin token to see them.</p>
      </Section>
    );
  return <NodeTable />;
}

function NodeTable() {
  const list = usePoll((signal) => listNodes(signal), [], 5_000);
  const nodes = list.data;
  return (
    <Section title="Nodes">
      <p class="hint">
        The hosts that run units. A node is down when it missed three heartbeats (15 s). Cordon, drain or remove one on
        a host with <code>ums node</code>.
      </p>
      <ErrorLine error={list.error} />
      {!nodes ? (
        <p class="loading">Loading…</p>
      ) : nodes.length === 0 ? (
        <p class="empty">No node is registered.</p>
      ) : (
        <div class="table-wrap">
          <table class="nodes">
            <thead>
              <tr>
                <th>Name</th>
                <th>Status</th>
                <th>Units</th>
                <th>Memory free</th>
                <th>Disk free</th>
                <th>Labels</th>
                <th>Heartbeat</th>
              </tr>
            </thead>
            <tbody>
              {nodes.map((n) => (
                <tr key={n.id} data-node={n.name}>
                  <td>{n.name}</td>
                  <td>
                    <span class={`status status-${tone(n)}`}>{n.status}</span>
                  </td>
                  <td>{n.unit_slots === null ? n.units : `${n.units} / ${n.unit_slots}`}</td>
                  <td>
                    {size(n.memory_free_bytes)} <span class="hint">of {size(n.memory_bytes)}</span>
                  </td>
                  <td>
                    {size(n.disk_free_bytes)} <span class="hint">of {size(n.disk_bytes)}</span>
                  </td>
                  <td>
                    {Object.keys(n.labels).length === 0 ? (
                      <span class="hint">none</span>
                    ) : (
                      Object.entries(n.labels).map(([k, v]) => (
                        <span key={k} class="label">
                          {k}={v}
                        </span>
                      ))
                    )}
                  </td>
                  <td>
                    <time dateTime={n.heartbeat_at} title={new Date(n.heartbeat_at).toLocaleString()}>
                      {secondsAgo(n.heartbeat_age_seconds)}
                    </time>
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
