// Files: browse, view text, download, upload (drag and drop, with progress), rename, delete, mkdir.
import { useState } from "preact/hooks";
import { call, type FsEntry, get, headers, raw, unitPath, url } from "./api.js";
import { ConfirmButton, ErrorLine, Section, size, Time, useAction, usePoll } from "./ui.js";

const HOME = "/home/unit";
const join = (dir: string, name: string) => (dir === "/" ? `/${name}` : `${dir}/${name}`);
const parent = (p: string) => p.replace(/\/[^/]+$/, "") || "/";

/** PUT …/fs/write with upload progress (fetch reports none). */
function upload(name: string, path: string, file: Blob, onProgress: (fraction: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("PUT", url(unitPath(name, "/fs/write"), { path, workingDir: "/", mkdir: true }));
    for (const [k, v] of Object.entries(headers("PUT", { "Content-Type": "application/octet-stream" })))
      xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) return resolve();
      let msg = xhr.responseText;
      try {
        msg = (JSON.parse(xhr.responseText) as { error?: string }).error ?? msg;
      } catch {}
      reject(new Error(`${path}: ${msg || xhr.status}`));
    };
    xhr.onerror = () => reject(new Error(`${path}: upload failed`));
    xhr.send(file);
  });
}

export function Files({ name }: { name: string }) {
  const [dir, setDir] = useState(HOME);
  const [pathInput, setPathInput] = useState(HOME);
  const list = usePoll(
    (signal) =>
      get<{ entries: FsEntry[] }>(unitPath(name, "/fs/list"), { signal, query: { path: dir, workingDir: "/" } }),
    [name, dir],
  );
  const [viewing, setViewing] = useState<{ path: string; text: string } | null>(null);
  const [renaming, setRenaming] = useState<{ path: string; to: string } | null>(null);
  const [uploads, setUploads] = useState<Record<string, number>>({});
  const [dragging, setDragging] = useState(false);
  const [busy, error, run] = useAction();
  const go = (d: string) => {
    setDir(d);
    setPathInput(d);
    setViewing(null);
  };
  const sendFiles = (files: FileList | null) => {
    if (!files || files.length === 0) return;
    void run(async () => {
      try {
        for (const f of Array.from(files)) {
          const path = join(dir, f.name);
          setUploads((u) => ({ ...u, [f.name]: 0 }));
          await upload(name, path, f, (p) => setUploads((u) => ({ ...u, [f.name]: p })));
          setUploads((u) => ({ ...u, [f.name]: 1 }));
        }
      } finally {
        list.reload();
      }
    });
  };
  const view = (e: FsEntry) =>
    run(async () => {
      const res = await raw("GET", unitPath(name, "/fs/read"), { query: { path: e.path, workingDir: "/" } });
      const buf = new Uint8Array(await res.arrayBuffer());
      const slice = buf.subarray(0, 256 * 1024);
      const text = slice.includes(0)
        ? "(binary file: download it instead)"
        : new TextDecoder().decode(slice) + (buf.length > slice.length ? "\n… (truncated)" : "");
      setViewing({ path: e.path, text });
    });
  const entries = [...(list.data?.entries ?? [])].sort(
    (a, b) => Number(b.isDir) - Number(a.isDir) || a.name.localeCompare(b.name),
  );
  return (
    <Section title="Files">
      <form
        class="toolbar"
        onSubmit={(e) => {
          e.preventDefault();
          go(pathInput.startsWith("/") ? pathInput.replace(/(.)\/+$/, "$1") : join(dir, pathInput));
        }}
      >
        <button type="button" disabled={dir === "/"} onClick={() => go(parent(dir))}>
          Up
        </button>
        <input aria-label="Directory" value={pathInput} onInput={(e) => setPathInput(e.currentTarget.value)} />
        <button type="submit">Go</button>
        <button
          type="button"
          onClick={() => {
            const n = prompt("New directory name");
            if (n)
              void run(() =>
                call("POST", unitPath(name, "/exec"), { query: { cmd: ["mkdir", "-p", "--", join(dir, n)] } }).then(
                  list.reload,
                ),
              );
          }}
        >
          New directory
        </button>
        <label class="button">
          Upload
          <input type="file" multiple class="sr" onChange={(e) => sendFiles(e.currentTarget.files)} />
        </label>
      </form>
      <section
        aria-label="Drop files here to upload"
        class={`dropzone${dragging ? " over" : ""}`}
        onDragOver={(e) => {
          e.preventDefault();
          setDragging(true);
        }}
        onDragLeave={() => setDragging(false)}
        onDrop={(e) => {
          e.preventDefault();
          setDragging(false);
          sendFiles(e.dataTransfer?.files ?? null);
        }}
      >
        {Object.keys(uploads).length > 0 && (
          <ul class="uploads" aria-label="Uploads">
            {Object.entries(uploads).map(([f, p]) => (
              <li key={f}>
                {f} <progress max={1} value={p} /> {p >= 1 ? "done" : `${Math.round(p * 100)} %`}
              </li>
            ))}
          </ul>
        )}
        <ErrorLine error={list.error || error} />
        <div class="table-wrap">
          <table class="files">
            <thead>
              <tr>
                <th>Name</th>
                <th>Size</th>
                <th>Modified</th>
                <th>
                  <span class="sr">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {entries.map((e) => (
                <tr key={e.path} data-path={e.path}>
                  <td>
                    {renaming?.path === e.path ? (
                      <form
                        onSubmit={(ev) => {
                          ev.preventDefault();
                          const to = renaming.to.startsWith("/") ? renaming.to : join(dir, renaming.to);
                          void run(() =>
                            call("POST", unitPath(name, "/fs/rename"), {
                              body: { source: e.path, dest: to, workingDir: "/" },
                            }).then(() => {
                              setRenaming(null);
                              list.reload();
                            }),
                          );
                        }}
                      >
                        <input
                          aria-label="New name"
                          value={renaming.to}
                          onInput={(ev) => setRenaming({ path: e.path, to: ev.currentTarget.value })}
                        />
                        <button type="submit">Rename</button>
                        <button type="button" onClick={() => setRenaming(null)}>
                          Cancel
                        </button>
                      </form>
                    ) : e.isDir ? (
                      <button type="button" class="link" onClick={() => go(e.path)}>
                        {e.name}/
                      </button>
                    ) : (
                      <button type="button" class="link" onClick={() => view(e)}>
                        {e.name}
                      </button>
                    )}
                  </td>
                  <td>{e.isDir ? "" : size(e.size)}</td>
                  <td>
                    <Time iso={e.modTime} />
                  </td>
                  <td class="actions">
                    {!e.isDir && (
                      <a
                        class="button"
                        href={url(unitPath(name, "/fs/read"), { path: e.path, workingDir: "/" })}
                        download={e.name}
                      >
                        Download
                      </a>
                    )}
                    <button type="button" onClick={() => setRenaming({ path: e.path, to: e.name })}>
                      Rename
                    </button>
                    <ConfirmButton
                      label="Delete"
                      confirm={`Delete ${e.name}${e.isDir ? " and all it holds" : ""}?`}
                      danger
                      disabled={busy}
                      onConfirm={() =>
                        run(() =>
                          call("DELETE", unitPath(name, "/fs/delete"), {
                            body: { path: e.path, workingDir: "/", recursive: e.isDir },
                          }).then(list.reload),
                        )
                      }
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {list.data && entries.length === 0 && <p class="empty">Empty directory.</p>}
        <p class="hint">Drop files here to upload them into {dir}.</p>
      </section>
      {viewing && (
        <section class="viewer" aria-label={`Contents of ${viewing.path}`}>
          <header class="section-head">
            <h3>{viewing.path}</h3>
            <button type="button" onClick={() => setViewing(null)}>
              Close
            </button>
          </header>
          <pre>{viewing.text}</pre>
        </section>
      )}
    </Section>
  );
}
