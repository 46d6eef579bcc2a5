import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  ConfigError,
  defaultNodeName,
  MIN_NODE_SECRET,
  parseDnsServer,
  parseListen,
  parseNodeLabels,
  parseObjectStore,
  resolveConfig,
} from "./config.js";

describe("server configuration", () => {
  it("has the documented defaults", () => {
    const c = resolveConfig({}, {});
    assert.equal(c.listenHost, "127.0.0.1");
    assert.equal(c.listenPort, 7070);
    assert.equal(c.unitHost, "units.localhost");
    assert.match(c.dataDir, /\/data$/);
    assert.equal(c.databaseUrl, undefined);
    assert.equal(c.unitUrlScheme, "http");
    assert.ok(Object.isFrozen(c));
  });

  it("takes flags over environment over defaults", () => {
    const env = {
      UMS_LISTEN: "0.0.0.0:8000",
      UMS_UNIT_HOST: "u.example.com",
      UMS_DATA_DIR: "/tmp/x",
      UMS_DATABASE_URL: "postgres://h/db",
    };
    const fromEnv = resolveConfig({}, env);
    assert.equal(fromEnv.listenPort, 8000);
    assert.equal(fromEnv.unitHost, "u.example.com");
    assert.equal(fromEnv.dataDir, "/tmp/x");
    assert.equal(fromEnv.databaseUrl, "postgres://h/db");
    const fromFlags = resolveConfig({ listen: "[::1]:9000", unitHost: "Other.Example.", dataDir: "/tmp/y" }, env);
    assert.equal(fromFlags.listenHost, "::1");
    assert.equal(fromFlags.listenPort, 9000);
    assert.equal(fromFlags.unitHost, "other.example");
    assert.equal(fromFlags.dataDir, "/tmp/y");
  });

  it("takes units' default pids, CPU and disk limits from flags or environment, and refuses nonsense", () => {
    assert.deepEqual(resolveConfig({}, {}).unitDefaults, { pids: 1024, cpuCores: 1, diskMb: 10240 });
    assert.deepEqual(
      resolveConfig({}, { UMS_UNIT_PIDS: "2048", UMS_UNIT_CPU: "0.5", UMS_UNIT_DISK_MB: "512" }).unitDefaults,
      { pids: 2048, cpuCores: 0.5, diskMb: 512 },
    );
    assert.deepEqual(
      resolveConfig({ unitPids: "300", unitCpu: "2", unitDiskMb: "4096" }, { UMS_UNIT_PIDS: "2048" }).unitDefaults,
      { pids: 300, cpuCores: 2, diskMb: 4096 },
    );
    for (const unitDiskMb of ["", "64", "1.5", "big"]) {
      assert.throws(() => resolveConfig({ unitDiskMb }, {}), /unit disk size .* must be a number of MiB/);
    }
    for (const unitPids of ["", "8", "1.5", "lots", "2000000"]) {
      assert.throws(() => resolveConfig({ unitPids }, {}), /unit pids limit .* must be an integer from 16/);
    }
    for (const unitCpu of ["", "0", "-1", "one", "2000"]) {
      assert.throws(() => resolveConfig({ unitCpu }, {}), /unit CPU limit .* must be a number of cores/);
    }
  });

  it("reads the agent timeouts (issue #19 finding 8): 5 s and 10 s unless told, 100 ms to 10 min", () => {
    const d = resolveConfig({}, {});
    assert.deepEqual([d.agentConnectTimeoutMs, d.agentAnswerTimeoutMs], [5000, 10_000]);
    const env = { UMS_AGENT_CONNECT_TIMEOUT: "2s", UMS_AGENT_ANSWER_TIMEOUT: "30s" };
    const e = resolveConfig({}, env);
    assert.deepEqual([e.agentConnectTimeoutMs, e.agentAnswerTimeoutMs], [2000, 30_000]);
    const f = resolveConfig({ agentConnectTimeout: "500ms", agentAnswerTimeout: "1m" }, env);
    assert.deepEqual([f.agentConnectTimeoutMs, f.agentAnswerTimeoutMs], [500, 60_000]);
    assert.throws(
      () => resolveConfig({ agentAnswerTimeout: "soon" }, {}),
      /--agent-answer-timeout 'soon' is not a duration/,
    );
    assert.throws(
      () => resolveConfig({ agentConnectTimeout: "10ms" }, {}),
      /--agent-connect-timeout '10ms' must be from 100ms to 10m/,
    );
    assert.throws(() => resolveConfig({ agentAnswerTimeout: "1h" }, {}), ConfigError);
  });

  it("reads the metrics options (issue #17): on unless --no-metrics or UMS_METRICS=off; --metrics-listen", () => {
    const d = resolveConfig({}, {});
    assert.equal(d.metrics, true);
    assert.equal(d.metricsListen, undefined);
    assert.equal(resolveConfig({ metrics: false }, { UMS_METRICS: "on" }).metrics, false);
    assert.equal(resolveConfig({}, { UMS_METRICS: "off" }).metrics, false);
    assert.throws(() => resolveConfig({}, { UMS_METRICS: "maybe" }), /UMS_METRICS 'maybe' must be on or off/);
    assert.deepEqual(resolveConfig({ metricsListen: "127.0.0.1:9464" }, {}).metricsListen, {
      host: "127.0.0.1",
      port: 9464,
    });
    assert.deepEqual(resolveConfig({}, { UMS_METRICS_LISTEN: "[::1]:9464" }).metricsListen, {
      host: "::1",
      port: 9464,
    });
    assert.throws(() => resolveConfig({ metricsListen: "127.0.0.1:0" }, {}), /needs a port/);
    assert.throws(() => resolveConfig({ metricsListen: "nope" }, {}), /not HOST:PORT/);
  });

  it("parses listen addresses", () => {
    assert.deepEqual(parseListen("127.0.0.1:7070"), { host: "127.0.0.1", port: 7070 });
    assert.deepEqual(parseListen(":80"), { host: "0.0.0.0", port: 80 });
    assert.deepEqual(parseListen("[::]:1"), { host: "::", port: 1 });
    for (const bad of ["7070", "host:", "h:70000", "[zz]:1", "a:b:1", ""]) {
      assert.throws(() => parseListen(bad), ConfigError, bad);
    }
  });

  it("rejects bad unit hosts and URL settings with a message naming the value", () => {
    assert.throws(() => resolveConfig({ unitHost: "under_score.example" }, {}), /under_score\.example/);
    assert.throws(() => resolveConfig({ unitUrlScheme: "ftp" }, {}), /ftp/);
    assert.throws(() => resolveConfig({ unitUrlPort: "0" }, {}), /'0'/);
    assert.equal(resolveConfig({ unitUrlScheme: "https", unitUrlPort: "443" }, {}).unitUrlPort, 443);
  });
  it("reads the network options (issue #6)", () => {
    const d = resolveConfig({}, {});
    assert.equal(d.gatewayPort, 7071);
    assert.equal(d.dnsUpstream, undefined, "default: the host's resolver, read at start");
    assert.equal(d.egressRanges, undefined);
    assert.equal(d.uplinks, undefined);
    const c = resolveConfig(
      { gatewayPort: "8081", dnsUpstream: "127.0.0.1:5353" },
      { UMS_EGRESS_RANGES: "203.0.113.0/24, 198.51.100.0/24", UMS_UPLINKS: "none" },
    );
    assert.equal(c.gatewayPort, 8081);
    assert.equal(c.dnsUpstream, "127.0.0.1:5353");
    assert.deepEqual(c.egressRanges, ["203.0.113.0/24", "198.51.100.0/24"]);
    assert.deepEqual(c.uplinks, []);
    assert.deepEqual(resolveConfig({ egressRanges: "none", uplinks: "eth0,wg0" }, {}).egressRanges, []);
    assert.deepEqual(parseDnsServer("9.9.9.9"), { host: "9.9.9.9", port: 53 });
    assert.deepEqual(parseDnsServer("[::1]:53"), { host: "::1", port: 53 });
    assert.equal(resolveConfig({ gatewayPort: "0" }, {}).gatewayPort, 0, "0: an ephemeral gateway port");
    for (const bad of [
      { gatewayPort: "70000" },
      { gatewayPort: "" },
      { dnsUpstream: "dns.example" },
      { egressRanges: "10.0.0.0" },
      { uplinks: "a b" },
    ]) {
      assert.throws(() => resolveConfig(bad, {}), ConfigError, JSON.stringify(bad));
    }
  });

  it("reads --api-url (issue #15): an http(s) URL without credentials, query or fragment; the flag beats the env", () => {
    assert.equal(resolveConfig({}, {}).apiUrl, undefined, "default: an API process on this host");
    assert.equal(resolveConfig({}, { UMS_API_URL: "https://ums.example.com/" }).apiUrl, "https://ums.example.com");
    assert.equal(
      resolveConfig({ apiUrl: "http://10.0.0.5:7070/ums/" }, { UMS_API_URL: "https://other.example" }).apiUrl,
      "http://10.0.0.5:7070/ums",
    );
    for (const [bad, says] of [
      ["ums.example.com", /not a URL/],
      ["ftp://ums.example.com", /http:\/\/ or https:\/\//],
      ["https://user:pw@ums.example.com", /user name or password/],
      ["https://ums.example.com/?a=1", /query or #fragment/],
    ] as const) {
      assert.throws(
        () => resolveConfig({ apiUrl: bad }, {}),
        (err: Error) => err instanceof ConfigError && says.test(err.message),
        bad,
      );
    }
  });

  it("reads the node options (issue #15): name, labels, unit slots; flags beat env", () => {
    const d = resolveConfig({}, {}).node;
    assert.equal(d.name, defaultNodeName());
    assert.deepEqual(d.labels, {});
    assert.equal(d.unitSlots, undefined);
    const env = { UMS_NODE_NAME: "from-env", UMS_NODE_LABELS: "zone=a", UMS_NODE_UNITS: "5" };
    const single = { role: "all", listen: undefined, address: undefined, secret: undefined };
    assert.deepEqual(resolveConfig({}, env).node, { name: "from-env", labels: { zone: "a" }, unitSlots: 5, ...single });
    assert.deepEqual(resolveConfig({ nodeName: "Flag", nodeLabels: "", nodeUnitSlots: 7 }, env).node, {
      name: "flag",
      labels: {},
      unitSlots: 7,
      ...single,
    });
    assert.deepEqual(parseNodeLabels(" zone=a , example.com/gpu=yes,empty= "), {
      zone: "a",
      "example.com/gpu": "yes",
      empty: "",
    });
    for (const bad of ["zone", "=a", "Zone=a", "a=b c", "a=1,a=2", `k=${"v".repeat(64)}`]) {
      assert.throws(() => parseNodeLabels(bad), ConfigError, bad);
    }
    for (const bad of [
      { nodeName: "-x" },
      { nodeName: "a_b" },
      { nodeName: "x".repeat(64) },
      { nodeUnitSlots: 0 },
      { nodeUnitSlots: "2.5" },
    ]) {
      assert.throws(() => resolveConfig(bad, {}), ConfigError, JSON.stringify(bad));
    }
    // The host name's first label, made a DNS label.
    assert.equal(defaultNodeName("Build_Box.example.com"), "build-box");
    assert.equal(defaultNodeName("ip-10-0-0-1.ec2.internal"), "ip-10-0-0-1");
    assert.equal(defaultNodeName("___"), "node");
    assert.equal(defaultNodeName(""), "node");
  });

  it("reads the roles (issue #15): api and node need PostgreSQL and the node secret; a node needs its endpoint", () => {
    const pg = "postgres://u@127.0.0.1/ums";
    const secret = "s".repeat(MIN_NODE_SECRET);
    const node = resolveConfig(
      { role: "node", databaseUrl: pg, nodeListen: "10.0.0.5:7071" },
      { UMS_NODE_SECRET: secret },
    ).node;
    assert.equal(node.role, "node");
    assert.deepEqual(node.listen, { host: "10.0.0.5", port: 7071 });
    assert.equal(node.address, "10.0.0.5:7071");
    assert.equal(node.secret, secret);
    const everywhere = resolveConfig(
      {},
      {
        UMS_ROLE: "node",
        UMS_DATABASE_URL: pg,
        UMS_NODE_LISTEN: "0.0.0.0:7071",
        UMS_NODE_ADDRESS: "node1.internal:7071",
        UMS_NODE_SECRET: secret,
      },
    ).node;
    assert.equal(everywhere.address, "node1.internal:7071");
    assert.equal(resolveConfig({ role: "api", databaseUrl: pg }, { UMS_NODE_SECRET: secret }).node.role, "api");
    const cases: [Parameters<typeof resolveConfig>[0], NodeJS.ProcessEnv, RegExp][] = [
      [{ role: "worker" }, {}, /--role 'worker' is not one of all, api, node/],
      [{ role: "api" }, { UMS_NODE_SECRET: secret }, /--role api needs PostgreSQL/],
      [{ role: "node", databaseUrl: pg }, { UMS_NODE_SECRET: secret }, /--role node needs --node-listen/],
      [{ role: "api", databaseUrl: pg }, {}, /needs UMS_NODE_SECRET/],
      [{ role: "api", databaseUrl: pg }, { UMS_NODE_SECRET: "short" }, /at least 32 characters/],
      [{ nodeListen: "127.0.0.1:7071" }, {}, /with --node-listen needs UMS_NODE_SECRET/],
      [
        { role: "api", databaseUrl: pg, nodeListen: "127.0.0.1:7071" },
        { UMS_NODE_SECRET: secret },
        /--role api runs none/,
      ],
      [
        { role: "node", databaseUrl: pg, nodeListen: "0.0.0.0:7071" },
        { UMS_NODE_SECRET: secret },
        /give --node-address/,
      ],
      [
        { role: "node", databaseUrl: pg, nodeListen: "127.0.0.1:7071", nodeAddress: "0.0.0.0:1" },
        { UMS_NODE_SECRET: secret },
        /--node-address '0.0.0.0:1'/,
      ],
    ];
    for (const [input, env, message] of cases)
      assert.throws(() => resolveConfig(input, env), message, JSON.stringify(input));
  });

  it("reads --local-checkpoints (issue #15 retention): a whole number from 1, only with --object-store", () => {
    const store = "s3://ums-data/?endpoint=http://127.0.0.1:9000";
    assert.equal(resolveConfig({}, {}).localCheckpoints, undefined);
    assert.equal(resolveConfig({ objectStore: store }, {}).localCheckpoints, undefined);
    assert.equal(resolveConfig({ objectStore: store, localCheckpoints: "3" }, {}).localCheckpoints, 3);
    assert.equal(resolveConfig({ objectStore: store, localCheckpoints: 1 }, {}).localCheckpoints, 1);
    assert.equal(
      resolveConfig({}, { UMS_OBJECT_STORE: store, UMS_LOCAL_CHECKPOINTS: "5" }).localCheckpoints,
      5,
      "from the environment",
    );
    assert.equal(
      resolveConfig({ localCheckpoints: "2" }, { UMS_OBJECT_STORE: store, UMS_LOCAL_CHECKPOINTS: "5" })
        .localCheckpoints,
      2,
      "the flag beats the environment",
    );
    for (const bad of ["0", "-1", "2.5", "1e3", "two", " ", "0x10", 0, 1.5]) {
      assert.throws(
        () => resolveConfig({ objectStore: store, localCheckpoints: bad }, {}),
        (err: unknown) =>
          err instanceof ConfigError && /^--local-checkpoints '.*' must be a whole number from 1/.test(err.message),
        JSON.stringify(bad),
      );
    }
    assert.throws(
      () => resolveConfig({ localCheckpoints: "2" }, {}),
      (err: unknown) => err instanceof ConfigError && /--local-checkpoints needs --object-store/.test(err.message),
    );
    assert.throws(() => resolveConfig({}, { UMS_LOCAL_CHECKPOINTS: "2" }), /needs --object-store/);
  });

  it("reads --object-store (issue #15): bucket, prefix, endpoint, region, path style; never credentials", () => {
    assert.equal(resolveConfig({}, {}).objectStore, undefined);
    assert.deepEqual(parseObjectStore("s3://my-bucket"), {
      bucket: "my-bucket",
      keyPrefix: "",
      endpoint: undefined,
      region: "us-east-1",
      forcePathStyle: false,
    });
    assert.deepEqual(
      resolveConfig({}, { UMS_OBJECT_STORE: "s3://ums-data/prod/ckpt?endpoint=http://127.0.0.1:9000&region=eu-west-1" })
        .objectStore,
      {
        bucket: "ums-data",
        keyPrefix: "prod/ckpt/",
        endpoint: "http://127.0.0.1:9000",
        region: "eu-west-1",
        forcePathStyle: true,
      },
    );
    assert.equal(parseObjectStore("s3://b.example/?endpoint=https://x.example&path_style=false").forcePathStyle, false);
    for (const [bad, why] of [
      ["https://bucket", /is not an s3:\/\/ URL/],
      ["s3://key:secret@bucket", /must not carry credentials/],
      ["s3://B", /names bucket 'b'|names bucket 'B'/],
      ["s3://bucket/Upper", /has prefix .Upper\/., which is not/],
      ["s3://bucket?endpoint=ftp://x", /not http\(s\)/],
      ["s3://bucket?foo=1", /unknown option 'foo'/],
      ["s3://bucket?path_style=maybe", /path_style 'maybe'/],
      ["nonsense", /is not a URL/],
    ] as const) {
      assert.throws(
        () => parseObjectStore(bad),
        (err: unknown) => err instanceof ConfigError && why.test(err.message),
        bad,
      );
    }
  });
});
