import ts from "typescript";

// Floating promises (issue #11, issue #19 finding 6): a promise whose rejection nobody handles ends
// in the last-resort handler (faults.ts) or, without one, exits the process. biome's
// noFloatingPromises (biome.json) has no types from outside a file, and takes `void p` as handled;
// this check uses the compiler's types and does not. A promise counts as handled when it is awaited,
// returned, stored, or ends in `.catch(handler)`; `.then(onFulfilled, onRejected)` does not count,
// since a throw in onFulfilled is not caught by its sibling (that was the resolver's crash, issue #11).

export interface Finding {
  readonly file: string;
  readonly line: number;
  /** The offending code, on one line. */
  readonly code: string;
  readonly why: string;
}

/**
 * Whether values of `type` (or of a member of it) have a callable `then`. Fastify's instance and
 * reply are thenables whose `then` only waits for fastify's own work (plugin loading, sending the
 * reply); fastify reports those errors itself (ready/listen reject, the error handler): not promises here.
 */
function isThenable(checker: ts.TypeChecker, type: ts.Type): boolean {
  if (type.isUnion()) return type.types.some((t) => isThenable(checker, t));
  const parts = type.isIntersection() ? type.types : [type];
  if (parts.some((t) => (t.getSymbol() ?? t.aliasSymbol)?.getName().startsWith("Fastify"))) return false;
  const then = type.getProperty("then");
  if (!then) return false;
  const decl = then.valueDeclaration ?? then.declarations?.[0];
  const thenType = decl ? checker.getTypeOfSymbolAtLocation(then, decl) : checker.getDeclaredTypeOfSymbol(then);
  return thenType.getCallSignatures().length > 0;
}

/** `p.catch(handler)`: its rejection has an owner. */
function endsInCatch(expr: ts.Expression): boolean {
  const e = skipParens(expr);
  return (
    ts.isCallExpression(e) &&
    ts.isPropertyAccessExpression(e.expression) &&
    e.expression.name.text === "catch" &&
    e.arguments.length >= 1
  );
}

function skipParens(e: ts.Expression): ts.Expression {
  let x = e;
  while (ts.isParenthesizedExpression(x)) x = x.expression;
  return x;
}

/**
 * The function is passed where the callee ignores what it returns (a listener, a timer callback):
 * every type it may take there (every overload of a callee, every member of a union) returns void.
 */
function returnIgnored(checker: ts.TypeChecker, fn: ts.ArrowFunction | ts.FunctionExpression): boolean {
  let slots: ts.Type[] = [];
  const call = fn.parent;
  if (ts.isCallExpression(call) && call.arguments.includes(fn)) {
    const i = call.arguments.indexOf(fn);
    for (const sig of checker.getTypeAtLocation(call.expression).getCallSignatures()) {
      const param = sig.getParameters()[Math.min(i, sig.getParameters().length - 1)];
      if (param) slots.push(checker.getTypeOfSymbolAtLocation(param, call));
    }
  }
  if (slots.length === 0) {
    const ctx = checker.getContextualType(fn);
    if (ctx) slots = [ctx];
  }
  const sigs = slots.flatMap((t) => (t.isUnion() ? t.types : [t])).flatMap((t) => t.getCallSignatures());
  if (sigs.length === 0) return false;
  return sigs.every((s) => {
    const r = checker.getReturnTypeOfSignature(s);
    return (r.flags & ts.TypeFlags.Void) !== 0 && !isThenable(checker, r);
  });
}

const STORING = new Set([
  ts.SyntaxKind.EqualsToken,
  ts.SyntaxKind.QuestionQuestionEqualsToken,
  ts.SyntaxKind.BarBarEqualsToken,
  ts.SyntaxKind.AmpersandAmpersandEqualsToken,
]);

function returnsThenable(checker: ts.TypeChecker, fn: ts.ArrowFunction | ts.FunctionExpression): boolean {
  if (fn.modifiers?.some((m) => m.kind === ts.SyntaxKind.AsyncKeyword)) return true;
  const sig = checker.getSignatureFromDeclaration(fn);
  return !!sig && isThenable(checker, checker.getReturnTypeOfSignature(sig));
}

/** The floating promises of `files` (absolute paths), compiled with `options`. */
export function findFloatingPromises(files: readonly string[], options: ts.CompilerOptions): Finding[] {
  const program = ts.createProgram({
    rootNames: files,
    options: { ...options, noEmit: true, composite: false, incremental: false, declaration: false },
  });
  const checker = program.getTypeChecker();
  const findings: Finding[] = [];
  for (const sf of program.getSourceFiles()) {
    if (!files.includes(sf.fileName)) continue;
    const report = (node: ts.Node, why: string) => {
      const { line } = sf.getLineAndCharacterOfPosition(node.getStart(sf));
      const code = node.getText(sf).replace(/\s+/g, " ").slice(0, 160);
      findings.push({ file: sf.fileName, line: line + 1, code, why });
    };
    const floating = (e: ts.Expression) => isThenable(checker, checker.getTypeAtLocation(e)) && !endsInCatch(e);
    const visit = (node: ts.Node): void => {
      if (ts.isExpressionStatement(node)) {
        const e = skipParens(node.expression);
        const stored = ts.isBinaryExpression(e) && STORING.has(e.operatorToken.kind);
        if (ts.isVoidExpression(e)) {
          if (floating(e.expression)) report(node, "`void` drops a promise that may reject");
        } else if (!stored && !ts.isAwaitExpression(e) && floating(e)) {
          report(node, "a promise whose rejection nobody handles");
        }
      }
      if ((ts.isArrowFunction(node) || ts.isFunctionExpression(node)) && returnIgnored(checker, node)) {
        const body = node.body;
        if (ts.isVoidExpression(body) && !ts.isExpressionStatement(body.parent)) {
          if (floating(body.expression)) report(node, "`void` drops a promise that may reject");
        } else if (returnsThenable(checker, node) && !(!ts.isBlock(body) && endsInCatch(body))) {
          report(node, "an async callback where the caller ignores the returned promise");
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return findings;
}
