// The agent's version, set by the bundler (build.mjs defines __AGENT_VERSION__ from package.json).
declare const __AGENT_VERSION__: string | undefined;

export const AGENT_VERSION: string = typeof __AGENT_VERSION__ === "string" ? __AGENT_VERSION__ : "0.0.0-dev";
