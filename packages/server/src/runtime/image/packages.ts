/** Which base image to build: `full` is what units get; `test` is a smaller one for the test suite. */
export type ImageVariant = "full" | "test";

export const IMAGE_VARIANTS: readonly ImageVariant[] = ["full", "test"];

/** The Debian release images are built from. */
export const DEBIAN_SUITE = "bookworm";

/**
 * Packages installed on top of mmdebstrap's `minbase` variant (which already has bash, coreutils,
 * apt, dpkg, passwd, tar, gzip, findutils, grep, sed...).
 */
export const IMAGE_PACKAGES: Readonly<Record<ImageVariant, readonly string[]>> = Object.freeze({
  // What people expect on a dev machine (docs/IMAGES.md lists them): build tools, Python with pip
  // and venv, Node.js and npm (Debian's), and the everyday command-line tools.
  full: Object.freeze([
    "ca-certificates",
    "curl",
    "wget",
    "git",
    "procps",
    "iproute2",
    "iputils-ping",
    "netbase",
    "dnsutils",
    "less",
    "sudo",
    "locales",
    "nano",
    "vim",
    "openssh-client",
    "rsync",
    "gnupg",
    "xz-utils",
    "zip",
    "unzip",
    "bzip2",
    "file",
    "jq",
    "ripgrep",
    "tree",
    "htop",
    "lsof",
    "strace",
    "tmux",
    "sqlite3",
    "build-essential",
    "pkg-config",
    "python3",
    "python3-dev",
    "python3-pip",
    "python3-venv",
    "nodejs",
    "npm",
  ]),
  test: Object.freeze(["ca-certificates", "procps", "iproute2", "python3", "sudo", "curl"]),
});

/** The image name a variant is built as by default (`ums image build`, server start). */
export function defaultImageName(variant: ImageVariant): string {
  return variant === "full" ? "base" : "test";
}

export const DEFAULT_DEBIAN_MIRROR = "http://deb.debian.org/debian";
export const DEFAULT_DEBIAN_SECURITY_MIRROR = "http://deb.debian.org/debian-security";

/**
 * The apt sources an image is built from (and keeps in its /etc/apt/sources.list): the release, its
 * updates and its security updates. `UMS_DEBIAN_MIRROR` / `UMS_DEBIAN_SECURITY_MIRROR` point them at
 * another mirror; `UMS_DEBIAN_SECURITY_MIRROR=none` leaves security updates out.
 */
export function debianSources(env: NodeJS.ProcessEnv = process.env, suite = DEBIAN_SUITE): string[] {
  const mirror = (env.UMS_DEBIAN_MIRROR || DEFAULT_DEBIAN_MIRROR).replace(/\/+$/, "");
  const security = (env.UMS_DEBIAN_SECURITY_MIRROR || DEFAULT_DEBIAN_SECURITY_MIRROR).replace(/\/+$/, "");
  for (const url of [mirror, security]) {
    if (url !== "none" && !/^(https?|file):\/\/\S+$/.test(url)) throw new Error(`Debian mirror '${url}' is not a URL`);
  }
  const sources = [`deb ${mirror} ${suite} main`, `deb ${mirror} ${suite}-updates main`];
  if (security !== "none") sources.push(`deb ${security} ${suite}-security main`);
  return sources;
}

/** A valid image name: it becomes a directory under `<pool>/images`. */
export function imageNameProblem(name: string): string | undefined {
  if (!/^[a-z0-9][a-z0-9._-]{0,62}$/.test(name)) {
    return "must be 1-63 characters of a-z, 0-9, '.', '_', '-', starting with a letter or digit";
  }
  return undefined;
}
