import {
  moveUnit,
  NodeDirectory,
  NodeInUseError,
  NodePlacement,
  type NodeState,
  newestStored,
  nodeIsUp,
  nodeStatus,
  rehomeUnit,
} from "@ums/server/nodes";
import { Command } from "commander";
import { UsageError } from "../errors.js";
import { withDataDir, withStore } from "../options.js";
import { humanBytes } from "./top.js";

const labelsText = (labels: Readonly<Record<string, string>>) =>
  Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(",") || "-";

/** `ums node list|cordon|uncordon|drain|remove` (issue #15; docs/SCALE-OUT.md): the nodes sharing the database. */
export function nodeCommand(): Command {
  const node = new Command("node").description("the hosts (nodes) that run units for this database");

  withDataDir(node.command("list"))
    .description("list nodes: up or down (heartbeat), state, units, what they have free")
    .option("--json", "one JSON object per line")
    .action(async (opts: { json?: boolean; dataDir?: string }) => {
      await withStore(opts, async (store) => {
        const now = Date.now();
        const rows = (await store.nodes.usage("")).sort((a, b) => (a.node.name < b.node.name ? -1 : 1));
        const out = rows.map(({ node: n, units }) =>
          opts.json
            ? JSON.stringify({
                id: n.id,
                name: n.name,
                up: nodeIsUp(n, now),
                state: n.state,
                units,
                unit_slots: n.capacity.unitSlots,
                cpus: n.capacity.cpus,
                memory_bytes: n.capacity.memoryBytes,
                memory_free_bytes: n.free.memoryBytes,
                disk_bytes: n.capacity.diskBytes,
                disk_free_bytes: n.free.diskBytes,
                labels: n.labels,
                address: n.address,
                version: n.version,
                started_at: n.startedAt,
                heartbeat_at: n.heartbeatAt,
              })
            : [
                n.name,
                nodeStatus(n, now),
                n.capacity.unitSlots === null ? `${units}` : `${units}/${n.capacity.unitSlots}`,
                n.capacity.cpus,
                `${humanBytes(n.free.memoryBytes)}/${humanBytes(n.capacity.memoryBytes)}`,
                `${humanBytes(n.free.diskBytes)}/${humanBytes(n.capacity.diskBytes)}`,
                labelsText(n.labels),
                n.heartbeatAt,
              ].join("\t"),
        );
        if (!opts.json) {
          out.unshift(
            ["NAME", "STATUS", "UNITS", "CPUS", "MEMORY FREE", "DISK FREE", "LABELS", "HEARTBEAT"].join("\t"),
          );
        }
        process.stdout.write(out.length ? `${out.join("\n")}\n` : "");
      });
    });

  const setState = (verb: string, state: NodeState, what: string) =>
    withDataDir(node.command(verb))
      .description(what)
      .argument("<name>", "node name, as `ums node list` shows it")
      .action(async (name: string, opts: { dataDir?: string }) => {
        await withStore(opts, async (store) => {
          const n = await store.nodes.setState(name, state);
          if (!n) throw new UsageError(`no node '${name}'; 'ums node list' shows them`);
          process.stdout.write(`${n.name}: ${nodeStatus(n)}\n`);
        });
      });
  setState("cordon", "cordoned", "give a node no new units; its units stay and run");
  setState("uncordon", "active", "give a node new units again");

  withDataDir(node.command("drain"))
    .description(
      "cordon a node and move every unit off it to the others, through the object store (needs UMS_NODE_SECRET; the node must be up, or --from-store)",
    )
    .argument("<name>", "node name")
    .option("--json", "one JSON object per unit moved or failed")
    .option(
      "--from-store",
      "for a node that is down for good: make each of its units again on another node from its newest checkpoint in the object store; what changed in it since that checkpoint is lost",
    )
    .action(async (name: string, opts: { json?: boolean; fromStore?: boolean; dataDir?: string }) => {
      const secret = process.env.UMS_NODE_SECRET ?? "";
      if (secret.length < 32) {
        throw new UsageError("ums node drain calls the nodes: set UMS_NODE_SECRET (the deployment's node secret)");
      }
      await withStore(opts, async (store) => {
        const found = await store.nodes.getByName(name);
        if (!found) throw new UsageError(`no node '${name}'; 'ums node list' shows them`);
        const unitsOf = async (id: string) =>
          (await store.units.withStatus(["cold", "warm", "running"], id)).filter((u) => u.nodeId === id);
        if (opts.fromStore) {
          if (nodeIsUp(found)) {
            throw new UsageError(
              `node '${name}' is up (heartbeat ${found.heartbeatAt}): drain it without --from-store (its units move with their files as they are now)`,
            );
          }
          // Without a store for the nodes nothing is ever copied there: nothing can be made again.
          const units = await unitsOf(found.id);
          const stored = await Promise.all(
            units.map(async (u) => newestStored(u, await store.checkpoints.list(u.id)) !== undefined),
          );
          if (units.length > 0 && !stored.includes(true)) {
            throw new UsageError(
              `node '${name}' has ${units.length} units and none has a checkpoint in the object store (the nodes copy checkpoints there with --object-store): none can be made again elsewhere; 'ums node remove ${name} --forget-units' drops their records`,
            );
          }
        }
        const n = await store.nodes.setState(name, "cordoned");
        if (!n) throw new UsageError(`no node '${name}'; 'ums node list' shows them`);
        if (!opts.fromStore && !nodeIsUp(n)) {
          throw new UsageError(
            `node '${name}' is down (heartbeat ${n.heartbeatAt}): its units move only from a running node (it stays cordoned); if it is lost for good, 'ums node drain ${name} --from-store' makes them again from the object store`,
          );
        }
        const nodes = new NodeDirectory(store, undefined, secret, { connectMs: 5_000, answerMs: 10_000 });
        const placement = new NodePlacement(store, (x) => x.address !== "");
        const units = await unitsOf(n.id);
        let failed = 0;
        for (const unit of units) {
          const org = await store.orgs.getById(unit.orgId);
          const say = (line: Record<string, unknown>, text: string) =>
            process.stdout.write(
              opts.json ? `${JSON.stringify({ unit: unit.name, org: org?.slug, ...line })}\n` : `${text}\n`,
            );
          try {
            if (!org) throw new Error("its organization is gone");
            if (opts.fromStore && !newestStored(unit, await store.checkpoints.list(unit.id))) {
              throw new Error(`no checkpoint of its files is in the object store: it stays on ${name}`);
            }
            const target = await placement.choose(org, { not: n.id });
            if (opts.fromStore) {
              const made = await rehomeUnit(store, nodes, { unit, from: n.id, target }, () => {});
              const cp = made.checkpoint;
              say(
                { moved: true, node: made.node, checkpoint: cp.id, checkpoint_at: cp.createdAt },
                `${org.slug}/${unit.name}: made again on ${made.node} from checkpoint ${cp.id} of ${cp.createdAt} (what changed after it is lost)`,
              );
            } else {
              const moved = await moveUnit(store, nodes, { unit, from: n.id, target }, () => {});
              say(
                { moved: true, node: moved.node, checkpoint: moved.checkpoint.id },
                `${org.slug}/${unit.name}: moved to ${moved.node}`,
              );
            }
          } catch (err) {
            failed++;
            const why = err instanceof Error ? err.message : String(err);
            say({ moved: false, error: why }, `${org?.slug ?? unit.orgId}/${unit.name}: not moved: ${why}`);
          }
        }
        if (!opts.json) {
          const done = opts.fromStore ? "made again from the object store" : "moved";
          process.stdout.write(
            `${name}: ${units.length - failed} of ${units.length} units ${done}; it stays cordoned\n`,
          );
        }
        if (failed > 0) process.exitCode = 1;
      });
    });

  withDataDir(node.command("remove"))
    .description(
      "remove a node that is gone for good (refused while it is up, and while units, templates or images name it)",
    )
    .argument("<name>", "node name")
    .option(
      "--forget-units",
      "also remove the records of its units, templates and images (their files were on that host)",
    )
    .action(async (name: string, opts: { forgetUnits?: boolean; dataDir?: string }) => {
      await withStore(opts, async (store) => {
        const n = await store.nodes.getByName(name);
        if (!n) throw new UsageError(`no node '${name}'; 'ums node list' shows them`);
        if (nodeIsUp(n)) {
          throw new UsageError(`node '${name}' is up (heartbeat ${n.heartbeatAt}): stop its 'ums serve' first`);
        }
        let removed: Awaited<ReturnType<typeof store.nodes.remove>>;
        try {
          removed = await store.nodes.remove(name, { forgetUnits: opts.forgetUnits === true });
        } catch (err) {
          if (err instanceof NodeInUseError) {
            throw new UsageError(
              `${err.message}: delete them first, or give --forget-units to drop their records too (their files were on that host)`,
            );
          }
          throw err;
        }
        const held = removed
          ? [
              removed.units > 0 && `${removed.units} units`,
              removed.templates > 0 && `${removed.templates} templates`,
              removed.images > 0 && `${removed.images} images`,
            ].filter((p) => p !== false)
          : [];
        const forgot = held.length > 0 ? ` and the records of its ${held.join(", ")}` : "";
        process.stdout.write(`removed ${name}${forgot}\n`);
      });
    });

  return node;
}
