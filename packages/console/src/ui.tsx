// Small shared pieces: polling, errors, a two-step delete, times and sizes.
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";

/**
 * Loads now and every `everyMs` (0: once) while the page is visible; `reload` loads at once. With
 * `initial` (data loaded before the first render) the first load is the next poll.
 */
export function usePoll<T>(
  load: (signal: AbortSignal) => Promise<T>,
  deps: unknown[],
  everyMs = 0,
  initial?: T,
): { data: T | undefined; error: string; reload: () => void } {
  const [data, setData] = useState<T | undefined>(initial);
  const preloaded = useRef(initial !== undefined);
  const mounted = useRef(false);
  const [error, setError] = useState("");
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    if (mounted.current) setData(undefined);
    mounted.current = true;
  }, deps);
  useEffect(() => {
    const ctl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = () => {
      if (everyMs && document.hidden) {
        timer = setTimeout(run, everyMs);
        return;
      }
      loadRef
        .current(ctl.signal)
        .then(
          (d) => {
            setData(d);
            setError("");
          },
          (e: unknown) => {
            if (!ctl.signal.aborted) setError(message(e));
          },
        )
        .finally(() => {
          if (everyMs && !ctl.signal.aborted) timer = setTimeout(run, everyMs);
        });
    };
    if (!preloaded.current) run();
    else if (everyMs) timer = setTimeout(run, everyMs);
    preloaded.current = false;
    return () => {
      ctl.abort();
      clearTimeout(timer);
    };
  }, [...deps, tick, everyMs]);
  return { data, error, reload: () => setTick((t) => t + 1) };
}

export function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export function ErrorLine({ error }: { error: string }) {
  return error ? (
    <p class="error" role="alert">
      {error}
    </p>
  ) : null;
}

/** A button that asks once more before it acts. */
export function ConfirmButton(props: {
  label: string;
  confirm: string;
  onConfirm: () => unknown;
  danger?: boolean;
  disabled?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  if (!asking)
    return (
      <button
        type="button"
        class={props.danger ? "danger" : ""}
        disabled={props.disabled}
        onClick={() => setAsking(true)}
      >
        {props.label}
      </button>
    );
  return (
    <span class="confirm">
      <span>{props.confirm}</span>
      <button
        type="button"
        class="danger"
        onClick={() => {
          setAsking(false);
          props.onConfirm();
        }}
      >
        Yes
      </button>
      <button type="button" onClick={() => setAsking(false)}>
        No
      </button>
    </span>
  );
}

/** Runs an action, keeping its error and whether it runs. */
export function useAction(): [busy: boolean, error: string, run: (fn: () => Promise<unknown>) => Promise<void>] {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const run = async (fn: () => Promise<unknown>) => {
    setBusy(true);
    setError("");
    try {
      await fn();
    } catch (e) {
      setError(message(e));
    } finally {
      setBusy(false);
    }
  };
  return [busy, error, run];
}

export function ago(iso: string | null | undefined): string {
  if (!iso) return "never";
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return `${Math.max(s, 0)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

export function Time({ iso }: { iso: string | null | undefined }) {
  return iso ? (
    <time dateTime={iso} title={new Date(iso).toLocaleString()}>
      {ago(iso)}
    </time>
  ) : (
    <span>never</span>
  );
}

export function size(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(1)} GiB`;
}

export function Status({ status }: { status: string }) {
  return <span class={`status status-${status}`}>{status}</span>;
}

export function Section(props: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section>
      <header class="section-head">
        <h2>{props.title}</h2>
        {props.actions}
      </header>
      {props.children}
    </section>
  );
}
