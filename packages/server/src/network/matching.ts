import type { NetworkPolicy, NetworkRule } from "@ums/protocol";
import { type DomainPattern, normalizeName, parsePattern, patternText, specificity } from "./domain.js";
import { PRESETS, presetNames } from "./presets/index.js";

export interface CompiledRule {
  readonly action: "allow" | "deny";
  readonly pattern: DomainPattern;
  /** How the rule reads in decisions: `rule 2: allow *.github.com` or `… (from preset defaults)`. */
  readonly source: string;
}

export interface Decision {
  readonly verdict: "allowed" | "denied" | "open";
  readonly rule?: string;
}

/**
 * A policy ready to match (spec 2.10, docs/ARCHITECTURE.md section 7). Presets are expanded where they are
 * included, so order is kept. An empty policy enforces nothing.
 */
export class CompiledPolicy {
  private constructor(readonly rules: readonly CompiledRule[]) {}

  get enforced(): boolean {
    return this.rules.length > 0;
  }

  /** Compiles a policy, or lists what is wrong with each bad rule (naming it by position). */
  static compile(policy: NetworkPolicy): CompiledPolicy | { errors: string[] } {
    const errors: string[] = [];
    const rules: CompiledRule[] = [];
    policy.rules.forEach((r, i) => {
      const out = compileRule(r, i);
      if (typeof out === "string") errors.push(out);
      else rules.push(...out);
    });
    return errors.length > 0 ? { errors } : new CompiledPolicy(rules);
  }

  static readonly OPEN = new CompiledPolicy([]);

  /**
   * The most specific matching rule decides; among equally specific ones the later wins. With
   * rules present, a name no rule matches is denied.
   */
  decide(rawName: string): Decision {
    if (!this.enforced) return { verdict: "open" };
    const name = normalizeName(rawName);
    let best: CompiledRule | undefined;
    let bestScore = -1;
    for (const rule of this.rules) {
      const score = specificity(rule.pattern, name);
      if (score >= 0 && score >= bestScore) {
        best = rule;
        bestScore = score;
      }
    }
    if (!best) return { verdict: "denied", rule: "no rule matches (a policy with rules denies everything else)" };
    return { verdict: best.action === "allow" ? "allowed" : "denied", rule: best.source };
  }
}

function describe(r: NetworkRule, i: number): string {
  return `rules[${i}] (${JSON.stringify(r)})`;
}

function compileRule(r: NetworkRule, i: number): CompiledRule[] | string {
  const where = describe(r, i);
  if (r.include !== undefined) {
    if (r.domain !== undefined || r.action !== undefined) {
      return `${where}: a rule has either 'include' or 'action' with 'domain', not both`;
    }
    const preset = Object.hasOwn(PRESETS, r.include) ? PRESETS[r.include] : undefined;
    if (!preset) return `${where}: unknown preset '${r.include}'; known presets: ${presetNames().join(", ")}`;
    return preset.map((d) => {
      const pattern = parsePattern(d) as DomainPattern;
      return { action: "allow", pattern, source: `rule ${i}: allow ${d} (from preset ${r.include})` };
    });
  }
  if (r.domain === undefined) return `${where}: give 'domain' (with 'action') or 'include'`;
  if (r.action !== "allow" && r.action !== "deny") {
    return `${where}: action must be 'allow' or 'deny'${r.action === undefined ? " (it is missing)" : ""}`;
  }
  const pattern = parsePattern(r.domain);
  if (typeof pattern === "string") return `${where}: ${pattern}`;
  return [{ action: r.action, pattern, source: `rule ${i}: ${r.action} ${patternText(pattern)}` }];
}
