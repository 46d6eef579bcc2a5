import { Command } from "commander";
import { UsageError } from "../errors.js";
import { withDataDir } from "../options.js";

/** `ums serve`: the control plane in the foreground until SIGTERM or SIGINT. */
export function serveCommand(): Command {
  return withDataDir(new Command("serve"))
    .description("run the ums server")
    .option("--listen <host:port>", "address to listen on (env UMS_LISTEN, default 127.0.0.1:7070)")
    .option(
      "--unit-host <host>",
      "units are reached at <name>-<random>.<host> (env UMS_UNIT_HOST, default units.localhost)",
    )
    .option(
      "--pool-device <dev>",
      "block device for the btrfs pool (env UMS_POOL_DEVICE; default a loop file in the data dir)",
    )
    .option("--pool-dir <dir>", "an already mounted btrfs filesystem to use as the pool (env UMS_POOL_DIR)")
    .option("--image-variant <full|test>", "base image of new units (env UMS_IMAGE_VARIANT, default full)")
    .option("--idle-warm <duration>", "pause idle running units after this long (env UMS_IDLE_WARM, default 30s)")
    .option("--idle-cold <duration>", "stop warm units after this long (env UMS_IDLE_COLD, default 10m)")
    .option("--unit-subnet <cidr>", "IPv4 range for units' links (env UMS_UNIT_SUBNET, default 10.209.0.0/16)")
    .option(
      "--dns-upstream <ip[:port]>",
      "resolver for units' allowed lookups (env UMS_DNS_UPSTREAM, default the host's from /etc/resolv.conf)",
    )
    .option(
      "--egress-ranges <cidrs|none>",
      "units reach only these public IPv4 ranges, comma-separated (env UMS_EGRESS_RANGES, default all public)",
    )
    .option(
      "--uplinks <ifs|none>",
      "interfaces ums turns forwarding on for unit replies (env UMS_UPLINKS, default those of the default routes)",
    )
    .option(
      "--unit-url-scheme <scheme>",
      "scheme of unit URLs as clients see them (env UMS_UNIT_URL_SCHEME, default http)",
    )
    .option(
      "--unit-url-port <port>",
      "port of unit URLs as clients see them (env UMS_UNIT_URL_PORT, default the listen port)",
    )
    .option(
      "--api-url <url>",
      "where units' sprites_admin connector reaches the ums API, e.g. the deployment's load balancer (env UMS_API_URL, default http://127.0.0.1:<--listen port>: an API process on this host)",
    )
    .option(
      "--gateway-port <port>",
      "port of the connector gateway units call, on 0.0.0.0 (env UMS_GATEWAY_PORT, default 7071; 0: any free port)",
    )
    .option(
      "--unit-pids <n>",
      "most processes and threads a unit may run where its resources policy sets none (env UMS_UNIT_PIDS, default 1024)",
    )
    .option(
      "--unit-cpu <cores>",
      "CPU a unit may use where its resources policy sets none, in cores, e.g. 0.5 or 2 (env UMS_UNIT_CPU, default 1)",
    )
    .option(
      "--unit-disk-mb <n>",
      "what a unit may write where its resources policy sets none, in MiB, checkpoints included (env UMS_UNIT_DISK_MB, default 10240)",
    )
    .option(
      "--connectors-config <file>",
      "JSON file with provider URL overrides, OAuth clients and platform keys (env UMS_CONNECTORS_CONFIG)",
    )
    .option(
      "--agent-connect-timeout <duration>",
      "how long to wait for a connection to a unit's agent (env UMS_AGENT_CONNECT_TIMEOUT, default 5s)",
    )
    .option(
      "--agent-answer-timeout <duration>",
      "how long to wait for a unit agent's first answer; a unit whose agent misses it is restarted by the next request (env UMS_AGENT_ANSWER_TIMEOUT, default 10s)",
    )
    .option(
      "--rate-limit-token <rate>",
      "requests a token may send: N per second (N/s), N/m per minute, or off; bursts of 10 s worth (env UMS_RATE_LIMIT_TOKEN, default 500/s)",
    )
    .option(
      "--rate-limit-org <rate>",
      "requests an organization's tokens may send together (env UMS_RATE_LIMIT_ORG, default 1000/s)",
    )
    .option(
      "--headers-timeout <duration>",
      "how long a request's head may take to arrive (env UMS_HEADERS_TIMEOUT, default 20s)",
    )
    .option(
      "--body-idle-timeout <duration>",
      "a request body from which nothing arrives for this long is answered 408 (env UMS_BODY_IDLE_TIMEOUT, default 60s)",
    )
    .option("--no-metrics", "no Prometheus metrics and no per-unit usage sampling (env UMS_METRICS=off)")
    .option(
      "--metrics-listen <host:port>",
      "also serve /metrics here, without a token (env UMS_METRICS_LISTEN); keep it on a private address",
    )
    .option(
      "--webhooks-allow-private",
      "let webhooks target loopback and private addresses (env UMS_WEBHOOKS_ALLOW_PRIVATE=1; default: public addresses only)",
    )
    .option(
      "--node-name <name>",
      "this host's name among the nodes sharing the database (env UMS_NODE_NAME, default the host name)",
    )
    .option(
      "--node-labels <k=v,...>",
      "labels placement matches, e.g. zone=a,disk=ssd (env UMS_NODE_LABELS, default none)",
    )
    .option(
      "--node-units <n>",
      "the most units this node holds (env UMS_NODE_UNITS, default no count limit: memory and disk decide)",
    )
    .option(
      "--role <role>",
      "all (the API and a node, the single-host default), api (the API only) or node (units only); api and node need PostgreSQL and UMS_NODE_SECRET (env UMS_ROLE)",
    )
    .option(
      "--node-listen <host:port>",
      "serve the node endpoint API processes call here (env UMS_NODE_LISTEN; needs UMS_NODE_SECRET)",
    )
    .option(
      "--node-address <host:port>",
      "where API processes reach this node's endpoint (env UMS_NODE_ADDRESS, default the --node-listen address)",
    )
    .option(
      "--object-store <url>",
      "copy checkpoints to this S3-compatible store: s3://BUCKET[/PREFIX/][?endpoint=URL&region=R] (env UMS_OBJECT_STORE; credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
    )
    .option(
      "--local-checkpoints <n>",
      "with --object-store: keep each unit's n newest checkpoints on this node and evict older ones once the store holds them (env UMS_LOCAL_CHECKPOINTS, default all stay)",
    )
    .option(
      "--log-format <format>",
      "auto (readable lines on a terminal, else JSON), json or pretty (env UMS_LOG_FORMAT, default auto)",
    )
    .action(
      async (opts: {
        dataDir?: string;
        listen?: string;
        unitHost?: string;
        unitUrlScheme?: string;
        unitUrlPort?: string;
        poolDevice?: string;
        poolDir?: string;
        imageVariant?: string;
        idleWarm?: string;
        idleCold?: string;
        unitSubnet?: string;
        gatewayPort?: string;
        apiUrl?: string;
        dnsUpstream?: string;
        egressRanges?: string;
        uplinks?: string;
        connectorsConfig?: string;
        unitPids?: string;
        unitCpu?: string;
        unitDiskMb?: string;
        agentConnectTimeout?: string;
        agentAnswerTimeout?: string;
        rateLimitToken?: string;
        rateLimitOrg?: string;
        headersTimeout?: string;
        bodyIdleTimeout?: string;
        webhooksAllowPrivate?: boolean;
        metrics?: boolean;
        metricsListen?: string;
        nodeName?: string;
        nodeLabels?: string;
        nodeUnits?: string;
        objectStore?: string;
        localCheckpoints?: string;
        logFormat?: string;
      }) => {
        // Signals are handled from the first moment: one that arrives while the server starts
        // (the first start builds the base image) aborts the start; later ones stop the server.
        const starting = new AbortController();
        let signalled: string | undefined;
        let onSignal: ((signal: string) => void) | undefined;
        for (const sig of ["SIGTERM", "SIGINT"] as const) {
          process.once(sig, () => {
            signalled ??= sig;
            starting.abort(new Error(`${sig} during start`));
            onSignal?.(sig);
          });
        }
        const { createLogger, installLastResort, resolveConfig, startServer } = await import("@ums/server");
        // commander sets `metrics` true unless --no-metrics: only the flag's false overrides UMS_METRICS.
        const config = resolveConfig({
          ...opts,
          nodeUnitSlots: opts.nodeUnits,
          metrics: opts.metrics === false ? false : undefined,
        });
        const format = opts.logFormat ?? process.env.UMS_LOG_FORMAT ?? "auto";
        if (!["auto", "json", "pretty"].includes(format)) {
          throw new UsageError(`--log-format must be auto, json or pretty, got '${format}'`);
        }
        const pretty = format === "pretty" || (format === "auto" && process.stderr.isTTY === true);
        const logger = pretty
          ? createLogger(undefined, (await import("./serve-log.js")).prettyDestination(process.stderr))
          : createLogger();
        // An error nothing handled is logged and counted, and the server keeps serving (faults.ts).
        installLastResort(logger);
        let server: Awaited<ReturnType<typeof startServer>>;
        try {
          const { handleMcpHttp } = await import("@ums/mcp");
          server = await startServer(config, { logger, signal: starting.signal, mcp: handleMcpHttp });
        } catch (err) {
          if (!signalled) throw err;
          logger.info({ signal: signalled }, "stopped while starting");
          return;
        }
        await new Promise<void>((resolve) => {
          onSignal = (signal) => {
            logger.info({ signal }, "shutting down");
            server.close().then(resolve, (err) => {
              logger.error({ err }, "shutdown failed");
              process.exitCode = 1;
              resolve();
            });
          };
          if (signalled) onSignal(signalled);
        });
        // Everything ums owns is closed; handles it does not (a unit's idle keep-alive connection,
        // a pipe of a process a unit started) must not keep a stopped server alive.
        logger.info("stopped");
        process.exit();
      },
    );
}
