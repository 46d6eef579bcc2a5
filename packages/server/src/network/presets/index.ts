import { AI, DEBIAN, DOCKER, GITHUB, GO, NPM, PYPI, RUBY, RUST } from "./ecosystems.js";

/**
 * Named presets a policy rule can `include` (spec 2.10): data only, a list of allowed domain
 * patterns each. `defaults` is what most development needs; the others are one per ecosystem.
 */
export const PRESETS: Readonly<Record<string, readonly string[]>> = Object.freeze({
  defaults: [...GITHUB, ...NPM, ...PYPI, ...DEBIAN, ...DOCKER, ...AI],
  github: GITHUB,
  npm: NPM,
  pypi: PYPI,
  debian: DEBIAN,
  docker: DOCKER,
  ai: AI,
  go: GO,
  rust: RUST,
  ruby: RUBY,
});

export function presetNames(): string[] {
  return Object.keys(PRESETS).sort();
}
