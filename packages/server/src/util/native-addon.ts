/**
 * A node addon of the server's (src/native/*.c, built into dist/native by `npm run build:agent`):
 * its exports, or null when it is not there (built without a compiler or node's headers) or this
 * node cannot load it. Callers keep a way without it.
 */
export function loadAddon<T>(file: string): T | null {
  try {
    const m = { exports: {} as T };
    process.dlopen(m, file);
    return m.exports;
  } catch {
    return null;
  }
}
