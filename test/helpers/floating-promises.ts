/**
 * Finds promises a caller forgot (issue 24 item 1: the store became asynchronous, and a store call left without
 * `await` either runs unobserved or stands in for its value): an expression statement whose value is a promise and
 * is neither awaited, returned nor marked `void`; a promise used as a condition (`if (p)`, `!p`, `p ? :`, `p && …`,
 * `p ?? …`), which is always truthy; an arrow whose expression body is a promise handed where a callback's
 * result is ignored (`rows.forEach((r) => store.x.put(r))`) or tested (`ids.filter((id) => store.x.has(id))`);
 * and a promise handed on as a value where nothing expects one (an argument, a property, an array element, a
 * template part: `c.json({ limits: quotas.limits(org) })` would serialise `{}`).
 * A chain ending in `.catch(…)` or `.then(ok, fail)` handles its rejection and is not a finding, nor is tap's
 * own way of declaring a subtest (`t.test(…)`, `t.skip(…)`: tap awaits its subtests itself).
 */
import path from 'node:path';
import ts from 'typescript';

export interface Finding {
  file: string;
  line: number;
  kind: 'floating' | 'condition' | 'callback' | 'value';
  text: string;
}

/**
 * Methods that test or ignore their callback's result: array methods, and tap's synchronous throw assertions
 * (a callback that returns a rejected promise throws nothing: `t.rejects` is the assertion for it).
 */
const CALLBACK_METHODS = new Set(['forEach', 'filter', 'some', 'every', 'find', 'findIndex', 'findLast', 'findLastIndex', 'throws', 'doesNotThrow']);

function isPromiseType(checker: ts.TypeChecker, type: ts.Type): boolean {
  if (type.isUnion()) return type.types.some((t) => isPromiseType(checker, t));
  const then = type.getProperty('then');
  if (!then) return false;
  const thenType = checker.getTypeOfSymbol(then);
  return thenType.getCallSignatures().length > 0;
}

/** Every constituent (nullish aside) is a promise: an `if (maybeP)` on `Promise | undefined` is an existence test. */
function alwaysPromise(checker: ts.TypeChecker, type: ts.Type): boolean {
  if (type.isUnion()) return type.types.every((t) => isPromiseType(checker, t));
  return isPromiseType(checker, type);
}

function handled(e: ts.Expression): boolean {
  if (!ts.isCallExpression(e) || !ts.isPropertyAccessExpression(e.expression)) return false;
  const name = e.expression.name.text;
  return name === 'catch' || (name === 'then' && e.arguments.length >= 2);
}

/** The array literal handed to Promise.all/allSettled/race/any: its elements are meant to be promises. */
function combinatorArray(node: ts.Node): boolean {
  const call = node.parent;
  if (!ts.isArrayLiteralExpression(node) || !call || !ts.isCallExpression(call) || !ts.isPropertyAccessExpression(call.expression)) return false;
  return /^Promise$/.test(call.expression.expression.getText()) && ['all', 'allSettled', 'race', 'any'].includes(call.expression.name.text);
}

/** tap's subtest declarations (`t.test`, `t.skip`, `t.todo`, `t.only`: tap's method names), which tap itself awaits. */
const TAP_DECLARATIONS = new Set(['test', 'skip', 'todo', 'only']);
function tapDeclaration(checker: ts.TypeChecker, e: ts.Expression): boolean {
  if (!ts.isCallExpression(e) || !ts.isPropertyAccessExpression(e.expression) || !TAP_DECLARATIONS.has(e.expression.name.text)) return false;
  const receiver = checker.getTypeAtLocation(e.expression.expression);
  const names = (receiver.isIntersection() ? receiver.types : [receiver]).map((x) => x.getSymbol()?.getName());
  return names.includes('Test') || names.includes('TAP');
}

/** Climbs object and array literals: whether the literal holding `e` is handed to a call (not returned or kept). */
function passedToCall(e: ts.Node): boolean {
  let n: ts.Node = e.parent;
  while (ts.isPropertyAssignment(n) || ts.isShorthandPropertyAssignment(n) || ts.isObjectLiteralExpression(n) || ts.isArrayLiteralExpression(n)) {
    if (ts.isArrayLiteralExpression(n) && combinatorArray(n)) return false;
    n = n.parent;
  }
  return ts.isCallExpression(n) || ts.isNewExpression(n);
}

const ASSIGNMENTS = new Set([
  ts.SyntaxKind.EqualsToken, ts.SyntaxKind.BarBarEqualsToken, ts.SyntaxKind.AmpersandAmpersandEqualsToken, ts.SyntaxKind.QuestionQuestionEqualsToken,
]);

export function findFloatingPromises(program: ts.Program, include: (fileName: string) => boolean, root: string): Finding[] {
  const checker = program.getTypeChecker();
  const out: Finding[] = [];
  for (const sf of program.getSourceFiles()) {
    if (sf.isDeclarationFile || !include(sf.fileName)) continue;
    const report = (node: ts.Node, kind: Finding['kind']) =>
      out.push({
        file: path.relative(root, sf.fileName),
        line: sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1,
        kind,
        text: node.getText(sf).split('\n')[0]!.slice(0, 100),
      });
    const typeOf = (e: ts.Expression) => checker.getTypeAtLocation(e);
    const condition = (e: ts.Expression | undefined) => {
      if (e && alwaysPromise(checker, typeOf(e))) report(e, 'condition');
    };
    /**
     * A promise passed on where the receiving type is not itself promise-like (unknown, a plain object type…). For a
     * call argument the parameter as declared decides: a generic `json<T extends JSONValue>(v: T)` would otherwise
     * infer T from the promise itself and accept it.
     */
    const value = (e: ts.Expression, declared?: ts.Type) => {
      if (!alwaysPromise(checker, typeOf(e))) return;
      let expected = declared ?? checker.getContextualType(e);
      if (expected && expected.flags & ts.TypeFlags.TypeParameter) {
        const constraint = checker.getBaseConstraintOfType(expected);
        expected = constraint && !(constraint.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) ? constraint : checker.getContextualType(e);
      }
      if (expected && !(expected.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) && isPromiseType(checker, expected)) return;
      report(e, 'value');
    };
    const parameterType = (call: ts.CallExpression | ts.NewExpression, i: number): ts.Type | undefined => {
      const params = checker.getResolvedSignature(call)?.getDeclaration()?.parameters;
      if (!params?.length) return undefined;
      const p = params[Math.min(i, params.length - 1)]!;
      if (i >= params.length && !p.dotDotDotToken) return undefined;
      const t = checker.getTypeAtLocation(p);
      return p.dotDotDotToken ? (checker.getIndexTypeOfType(t, ts.IndexKind.Number) ?? t) : t;
    };
    const visit = (node: ts.Node): void => {
      if (ts.isExpressionStatement(node)) {
        let e = node.expression;
        while (ts.isParenthesizedExpression(e)) e = e.expression;
        const assignment = ts.isBinaryExpression(e) && ASSIGNMENTS.has(e.operatorToken.kind);
        if (!assignment && !ts.isVoidExpression(e) && !ts.isAwaitExpression(e) && !handled(e) && !tapDeclaration(checker, e) && isPromiseType(checker, typeOf(e))) report(e, 'floating');
      } else if (ts.isIfStatement(node) || ts.isWhileStatement(node) || ts.isDoStatement(node)) {
        condition(node.expression);
      } else if (ts.isForStatement(node)) {
        condition(node.condition);
      } else if (ts.isConditionalExpression(node)) {
        condition(node.condition);
      } else if (ts.isPrefixUnaryExpression(node) && node.operator === ts.SyntaxKind.ExclamationToken) {
        condition(node.operand);
      } else if (ts.isBinaryExpression(node)) {
        const op = node.operatorToken.kind;
        if (op === ts.SyntaxKind.AmpersandAmpersandToken || op === ts.SyntaxKind.BarBarToken || op === ts.SyntaxKind.QuestionQuestionToken) condition(node.left);
      } else if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && CALLBACK_METHODS.has(node.expression.name.text)) {
        const cb = node.arguments[0];
        if (cb && ts.isArrowFunction(cb) && !ts.isBlock(cb.body) && isPromiseType(checker, typeOf(cb.body))) report(cb, 'callback');
        else if (cb && (ts.isArrowFunction(cb) || ts.isFunctionExpression(cb)) && cb.modifiers?.some((m) => m.kind === ts.SyntaxKind.AsyncKeyword)) report(cb, 'callback');
      }
      if (ts.isCallExpression(node) || ts.isNewExpression(node)) {
        (node.arguments ?? []).forEach((a, i) => {
          if (!ts.isSpreadElement(a)) value(a, parameterType(node, i));
        });
      } else if (ts.isPropertyAssignment(node) && passedToCall(node)) {
        value(node.initializer);
      } else if (ts.isShorthandPropertyAssignment(node) && passedToCall(node)) {
        value(node.name);
      } else if (ts.isArrayLiteralExpression(node) && passedToCall(node.elements[0] ?? node)) {
        for (const el of node.elements) if (!ts.isSpreadElement(el) && !ts.isOmittedExpression(el)) value(el);
      } else if (ts.isTemplateSpan(node)) {
        value(node.expression);
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return out;
}

/** A program over a tsconfig (the test tsconfig: sources, scripts and tests). */
export function programFor(tsconfig: string): ts.Program {
  const parsed = ts.getParsedCommandLineOfConfigFile(tsconfig, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => { throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n')); } });
  if (!parsed) throw new Error(`cannot read ${tsconfig}`);
  return ts.createProgram({ rootNames: parsed.fileNames, options: parsed.options });
}
