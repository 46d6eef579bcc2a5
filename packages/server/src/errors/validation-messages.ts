import type { ErrorObject } from "ajv";

type AjvError = ErrorObject & { parentSchema?: { "x-message"?: string } };

/** One line per bad field, naming it the way the client sent it: `name`, `url_settings.auth`, `max_results`. */
export function formatValidationErrors(errors: readonly unknown[], context?: string): string[] {
  const all = errors as AjvError[];
  // A failed union also reports each branch's own failure; keep only the union's line.
  const unions = all.filter((e) => e.keyword === "anyOf").map((e) => e.instancePath);
  const insideUnion = (e: AjvError) =>
    e.keyword !== "anyOf" && unions.some((u) => e.instancePath === u || e.instancePath.startsWith(`${u}/`));
  const where = context === "body" ? "body" : (context ?? "request");
  const out = new Set<string>();
  for (const e of all) {
    if (insideUnion(e)) continue;
    const path = e.instancePath
      .split("/")
      .slice(1)
      .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"))
      .join(".");
    out.add(lineFor(e, path, where));
  }
  return [...out];
}

function lineFor(e: AjvError, path: string, where: string): string {
  const field = path || where;
  switch (e.keyword) {
    case "required":
      return `${join(path, String(e.params.missingProperty))}: is required`;
    case "additionalProperties":
      return `${join(path, String(e.params.additionalProperty))}: is not a known field`;
    case "type":
      return `${field}: must be ${article(String(e.params.type))}`;
    case "enum":
      return `${field}: must be one of ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}`;
    case "const":
      return `${field}: must be ${JSON.stringify(e.params.allowedValue)}`;
    case "anyOf":
      return `${field}: ${unionMessage(e)}`;
    default:
      return `${field}: ${e.parentSchema?.["x-message"] ?? e.message ?? "is invalid"}`;
  }
}

function join(path: string, field: string): string {
  return path ? `${path}.${field}` : field;
}

function article(type: string): string {
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

function unionMessage(e: AjvError): string {
  const branches = (e.schema as Array<{ const?: unknown; type?: string }> | undefined) ?? [];
  const consts = branches.filter((b) => "const" in b).map((b) => JSON.stringify(b.const));
  const nulls = branches.some((b) => b.type === "null");
  if (consts.length > 0) return `must be one of ${consts.join(", ")}${nulls ? " or null" : ""}`;
  return "has the wrong type or shape";
}
