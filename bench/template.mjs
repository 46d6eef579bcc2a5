#!/usr/bin/env node
// Template benchmark (issue #18): with --mib MiB of files in a unit (default 1024, random data),
// publishes a checkpoint of it as a template, then times, alternating, --n times each:
//   create from the template until the first exec answers
//   create from the base image until the first exec answers
// (goal: the template within 10 % of the base image: both are O(1) snapshots), and the publish
// call itself.
//
//   npx tsc -b && npm run build:agent && node bench/template.mjs [--mib 1024] [--n 5]
import { fmt, percentile, startBenchServer, timeIt } from "./lib.mjs";

const arg = (flag, dflt) => Number(process.argv[process.argv.indexOf(flag) + 1]) || dflt;
const MIB = arg("--mib", 1024);
const N = arg("--n", 5);
const bench = await startBenchServer({ env: { UMS_IDLE_WARM: "1h", UMS_IDLE_COLD: "1h" } });
const { url, auth } = bench;
const req = (method, path, body) =>
  fetch(url + path, {
    method,
    headers: { ...auth, ...(body && { "content-type": "application/json" }) },
    ...(body && { body: JSON.stringify(body) }),
  });
const exec = async (name, script) => {
  const res = await fetch(`${url}/v1/units/${name}/exec?cmd=sh&cmd=-c&cmd=${encodeURIComponent(script)}`, {
    method: "POST",
    headers: auth,
  });
  const body = Buffer.from(await res.arrayBuffer());
  if (body.at(-2) !== 3 || body.at(-1) !== 0) throw new Error(`exec failed: ${body.toString("latin1").slice(-300)}`);
  return body;
};
const create = async (body) => {
  const r = await req("POST", "/v1/units", body);
  if (r.status !== 201) throw new Error(`create ${JSON.stringify(body)}: ${r.status} ${await r.text()}`);
};

try {
  await create({ name: "data" });
  process.stderr.write(`writing ${MIB} MiB of random data into the unit...\n`);
  await exec("data", `head -c ${MIB}M /dev/urandom > /home/unit/big && sync`);
  const cp = await (await req("POST", "/v1/units/data/checkpoint", { comment: "template" })).text();
  if (!cp.includes('"type":"complete"')) throw new Error(`checkpoint: ${cp}`);
  let published;
  const publishMs = await timeIt(async () => {
    published = await req("POST", "/v1/templates", { name: "big", from: { unit: "data", checkpoint: "v0" } });
  });
  if (published.status !== 201) throw new Error(`publish: ${published.status} ${await published.text()}`);

  const fromTemplate = [];
  const fromBase = [];
  for (let i = 0; i < N; i++) {
    fromTemplate.push(
      await timeIt(async () => {
        await create({ name: `tpl${i}`, template: "big" });
        await exec(`tpl${i}`, "true");
      }),
    );
    fromBase.push(
      await timeIt(async () => {
        await create({ name: `base${i}` });
        await exec(`base${i}`, "true");
      }),
    );
    // The data is there (the size of the file, not read whole).
    const size = (await exec(`tpl${i}`, "stat -c %s /home/unit/big")).subarray(1, -2).toString().trim();
    if (Number(size.replace(/\D/g, "")) !== MIB * 1024 * 1024) throw new Error(`tpl${i}: big is ${size} bytes`);
    await req("DELETE", `/v1/units/tpl${i}`);
    await req("DELETE", `/v1/units/base${i}`);
  }
  const t50 = percentile(fromTemplate, 50);
  const b50 = percentile(fromBase, 50);
  console.log(`template with ${MIB} MiB, n=${N}`);
  console.log(`  publish (POST /v1/templates)            ${fmt(publishMs)}`);
  console.log(
    `  create from template to first exec p50  ${fmt(t50)}   (all: ${fromTemplate.map((x) => x.toFixed(0)).join(", ")})`,
  );
  console.log(
    `  create from base image to first exec p50 ${fmt(b50)}   (all: ${fromBase.map((x) => x.toFixed(0)).join(", ")})`,
  );
  console.log(`  template / base: ${((t50 / b50) * 100).toFixed(1)} %  (goal: within 110 %)`);
  await req("DELETE", "/v1/templates/big");
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  await bench.stop();
}
