/** The endpoints each ecosystem's tools reach (registries, their CDNs, release downloads). */
export const GITHUB = ["github.com", "*.github.com", "*.githubusercontent.com", "ghcr.io", "*.ghcr.io"];
export const NPM = [
  "registry.npmjs.org",
  "*.npmjs.org",
  "npmjs.com",
  "*.npmjs.com",
  "registry.yarnpkg.com",
  "nodejs.org",
];
export const PYPI = ["pypi.org", "*.pypi.org", "files.pythonhosted.org", "*.pythonhosted.org"];
export const DEBIAN = ["deb.debian.org", "security.debian.org", "*.debian.org"];
export const DOCKER = [
  "docker.io",
  "*.docker.io",
  "registry-1.docker.io",
  "auth.docker.io",
  "production.cloudflare.docker.com",
  "*.docker.com",
];
export const AI = [
  "api.openai.com",
  "api.anthropic.com",
  "generativelanguage.googleapis.com",
  "api.mistral.ai",
  "api.groq.com",
  "api.together.xyz",
  "huggingface.co",
  "*.huggingface.co",
];
export const GO = ["proxy.golang.org", "sum.golang.org", "go.dev", "*.go.dev", "storage.googleapis.com"];
export const RUST = ["crates.io", "*.crates.io", "static.rust-lang.org", "*.rust-lang.org"];
export const RUBY = ["rubygems.org", "*.rubygems.org", "*.rubyonrails.org"];
