import { join } from "node:path";
import type { ImageConfig } from "@ums/protocol";
import type { Logger } from "pino";
import { ConfigError, type ObjectStoreConfig, parseDnsServer, type ServerConfig } from "../../config.js";
import type { EmitEvent } from "../../events/event-log.js";
import { ServiceEventFollower } from "../../events/service-events.js";
import { Lifecycle } from "../../lifecycle/lifecycle.js";
import { hostResolver, NetworkEgress } from "../../network/egress.js";
import type { ObjectStore } from "../../replication/object-store.js";
import { openHostRuntime } from "../../runtime/host.js";
import type { UnitRuntime } from "../../runtime/runtime.js";
import type { CheckpointRecord, UnitRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import { nodeId as readOrMakeNodeId } from "../registry/registration.js";
import { PeerNodes } from "../remote/peers.js";
import { HttpTargets } from "./http-targets.js";
import { HostSockets } from "./internal-api/host-sockets.js";
import { LocalNode } from "./local-node.js";

export interface LocalNodeOpts {
  readonly config: ServerConfig;
  readonly store: Store;
  readonly log: Logger;
  /** The unit's URL as its environment shows it (spec 4.1). */
  readonly unitUrl: (unit: UnitRecord) => string;
  /** Injected by tests; opened from the config otherwise. */
  readonly runtime?: UnitRuntime;
  /** The idle sweep interval (tests shorten it). */
  readonly sweepMs?: number;
  /** Aborts a start that is still building the base image. */
  readonly signal?: AbortSignal;
  /** Issue #17: where the node's lifecycle events go. */
  readonly events?: EmitEvent;
  /**
   * Issue #15: this node's id; read from (or made in) `<dataDir>/node-id` when not given. The node
   * works on its own units, templates and images only (docs/SCALE-OUT.md).
   */
  readonly nodeId?: string;
}

/**
 * Opens the node of this host: the runtime (pool, base image, runc), the lifecycle, each running
 * unit's internal API socket and resolver; then re-adopts the units that kept running.
 */
export async function openLocalNode(opts: LocalNodeOpts): Promise<LocalNode> {
  const { config, store, log } = opts;
  const nodeId = opts.nodeId ?? (await readOrMakeNodeId(config.dataDir));
  // Issue #15: checkpoints are copied to the object store, when one is configured (its
  // credentials checked before anything is opened).
  const objects = config.objectStore && (await openObjectStore(config.objectStore));
  // Issue #18: a unit made from an organization image boots with its config (kept while units use it).
  const imageOf = async (id: string) => {
    const image = await store.images.getById(id);
    if (!image) throw new Error(`image ${id} of the unit is gone`);
    return { id, config: JSON.parse(image.config) as ImageConfig };
  };
  const runtime =
    opts.runtime ?? (await openHostRuntime({ ...config, ...(opts.signal && { signal: opts.signal }) }, log));
  const lifecycle = new Lifecycle(
    store,
    runtime,
    {
      idleWarmMs: config.idleWarmMs,
      idleColdMs: config.idleColdMs,
      sweepMs: opts.sweepMs ?? 1000,
      busyCpu: 0.05,
      agentTimeouts: { connectMs: config.agentConnectTimeoutMs, answerMs: config.agentAnswerTimeoutMs },
      nodeId,
    },
    log,
    async (unit) => ({
      unitId: unit.id,
      name: unit.name,
      url: opts.unitUrl(unit),
      resources: JSON.parse(unit.resources),
      privileges: JSON.parse(unit.privileges),
      network: unit.network,
      image: unit.imageId === null ? undefined : await imageOf(unit.imageId),
    }),
  );
  if (opts.events) lifecycle.setEvents(opts.events);
  const httpTargets = new HttpTargets();
  const hostSockets = new HostSockets({ store, runtime, lifecycle, log, httpTargets, replicas: objects !== undefined });
  const upstream = config.dnsUpstream ? parseDnsServer(config.dnsUpstream) : hostResolver();
  const egress = new NetworkEgress({ store, runtime, upstream, log });
  const emit = opts.events;
  const serviceEvents =
    emit && new ServiceEventFollower({ store, agentSocket: (id) => runtime.agentSocket(id), emit, log });
  // Loaded only with a store: the AWS SDK costs a start without one ~0.3 s.
  const replicator =
    objects &&
    new (await import("./replicator.js")).Replicator({
      store,
      objects,
      runtime,
      stateDir: join(config.dataDir, "replication"),
      log,
      nodeId,
      ...(config.localCheckpoints !== undefined && {
        retention: {
          keep: config.localCheckpoints,
          evict: (unitId, choose) => lifecycle.checkpoints.evictLocal(unitId, choose),
        },
      }),
    });
  if (replicator) {
    const needed = async (unitId: string, cp: CheckpointRecord, progress: (message: string) => void) => {
      await replicator.fetch(unitId, cp, progress);
    };
    lifecycle.checkpoints.setHooks({
      taken: (unitId, cpId) => replicator.taken(unitId, cpId),
      needed,
      deleted: (unitId, cpId) => replicator.checkpointDeleted(unitId, cpId),
      deleting: (unitId) => replicator.pauseUnit(unitId),
    });
    lifecycle.templates.setNeeded(needed);
  }
  const node = new LocalNode({
    store,
    runtime,
    lifecycle,
    egress,
    httpTargets,
    hostSockets,
    ...(serviceEvents && { serviceEvents }),
    ...(replicator && { replicator }),
    // Issue #15: with a node secret, units moving here come straight from the node they leave.
    ...(config.node.secret && { peers: new PeerNodes(store, config.node.secret) }),
  });
  lifecycle.setHooks({
    running: async (id) => {
      await hostSockets.open(id);
      await egress.open(id);
      serviceEvents?.open(id);
    },
    stopped: async (id) => {
      serviceEvents?.close(id);
      await egress.close(id);
      await hostSockets.close(id);
    },
  });
  // Re-adopts the units that kept running; a start that fails closes what it opened.
  await lifecycle.start().catch(async (err: unknown) => {
    await node.close().catch(() => {});
    throw err;
  });
  await node.startRetiredSweep(nodeId, log);
  if (replicator) {
    const left = await replicator.resume().catch((err: unknown) => {
      log.error({ err }, "listing the checkpoints still to copy to the object store failed");
      return 0;
    });
    if (left > 0)
      log.info({ checkpoints: left }, "copying checkpoints a stop or a failure left behind to the object store");
    // Issue #15: copies a lost node did not make of units that moved here.
    replicator.startAdopting();
  }
  return node;
}

/** The S3-compatible store of `--object-store`, its credentials from the environment (never from the config). */
export async function openObjectStore(
  o: ObjectStoreConfig,
  env: NodeJS.ProcessEnv = process.env,
): Promise<ObjectStore> {
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  if (!accessKeyId || !secretAccessKey) {
    throw new ConfigError(
      "--object-store needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment (the store's credentials)",
    );
  }
  const { S3ObjectStore } = await import("../../replication/object-store.js");
  const s3 = new S3ObjectStore({
    endpoint: o.endpoint,
    region: o.region,
    bucket: o.bucket,
    keyPrefix: o.keyPrefix,
    forcePathStyle: o.forcePathStyle,
    credentials: { accessKeyId, secretAccessKey, sessionToken: env.AWS_SESSION_TOKEN || undefined },
  });
  return s3;
}
