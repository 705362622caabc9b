import ts from 'typescript';
import type { Entry } from '../support/package-entries.js';

/** A name or member without a comment. */
export interface Missing {
  /** `entry: Name.member`, as the report lists it. */
  name: string;
  /** The declaration's file and 1-based line. */
  at: string;
}

/** True when the declaration carries a `/** … *\/` comment with some text (a description or a tag's). */
function documented(decl: ts.Node): boolean {
  return ts
    .getJSDocCommentsAndTags(decl)
    .filter(ts.isJSDoc)
    .some(
      (doc) =>
        (ts.getTextOfJSDocComment(doc.comment) ?? '').trim() !== '' ||
        (doc.tags ?? []).some((tag) => (ts.getTextOfJSDocComment(tag.comment) ?? '').trim() !== ''),
    );
}

function isPrivate(member: ts.Node): boolean {
  const name = (member as { name?: ts.Node }).name;
  if (name && ts.isPrivateIdentifier(name)) return true;
  const flags = ts.getCombinedModifierFlags(member as ts.Declaration);
  return (flags & ts.ModifierFlags.Private) !== 0;
}

/**
 * The public names and members without a TSDoc comment, as `entry: Name.member` lines. Every
 * exported symbol counts at its declaration (a re-export needs no comment of its own, and is
 * listed once, under the first entry that exports it); members are those of interfaces, type
 * literals (also nested in a property's, a parameter's or a return type), classes (all but
 * private ones and constructors) and enums, including members inherited from an unexported base.
 * `paths` maps a package specifier to its source entry, so re-exports across packages resolve.
 * TypeScript reads a comment as a member's TSDoc only when it starts its own line.
 */
export function undocumented(
  entries: Entry[],
  paths: Record<string, string[]> = {},
  options: ts.CompilerOptions = { types: ['node'] },
): Missing[] {
  const program = ts.createProgram(
    entries.map((e) => e.file),
    {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      noEmit: true,
      skipLibCheck: true,
      paths,
      ...options,
    },
  );
  const checker = program.getTypeChecker();
  const ours = (decl: ts.Node) => !decl.getSourceFile().isDeclarationFile;
  const seen = new Set<ts.Node>();
  const missing: Missing[] = [];

  const symbolOf = (node: ts.Node): ts.Symbol | undefined =>
    (node as { name?: ts.Node }).name
      ? checker.getSymbolAtLocation((node as unknown as { name: ts.Node }).name)
      : undefined;

  /** Checks one symbol (exported or a member) and walks into what it declares. */
  const visit = (entry: string, name: string, symbol: ts.Symbol): void => {
    // A member inherited by several classes has a symbol per class: count it at its declaration.
    const decls = (symbol.declarations ?? []).filter(ours);
    if (decls.length === 0 || decls.every((d) => seen.has(d))) return;
    for (const d of decls) seen.add(d);
    // A constant and a type of one name (`const Code = {...}; type Code = ...`) are two things a
    // reader looks up: each needs its comment. Overloads and merged interfaces need one in all.
    const aliases = decls.filter(ts.isTypeAliasDeclaration);
    const others = decls.filter((d) => !ts.isTypeAliasDeclaration(d));
    for (const group of [others, aliases]) {
      if (group.length === 0 || group.some(documented)) continue;
      const at = group[0]!.getSourceFile();
      const line = at.getLineAndCharacterOfPosition(group[0]!.getStart()).line + 1;
      const kind = group === aliases && others.length > 0 ? ' (type)' : '';
      missing.push({ name: `${entry}: ${name}${kind}`, at: `${at.fileName}:${line}` });
    }
    for (const decl of decls) walk(entry, name, decl);
    if (symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.Class)) {
      // Members that come from a base the entry does not export are still this type's surface.
      for (const prop of checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(symbol))) {
        const d = prop.declarations?.[0];
        if (d && !isPrivate(d))
          visit(entry, `${name}.${ts.getNameOfDeclaration(d)?.getText() ?? prop.name}`, prop);
      }
    }
    if (symbol.flags & ts.SymbolFlags.Module) {
      for (const inner of checker.getExportsOfModule(symbol)) exported(entry, `${name}.${inner.name}`, inner);
    }
  };

  /** The members a declaration introduces: those of its own body, and of type literals in its types. */
  const walk = (entry: string, name: string, decl: ts.Node): void => {
    if (
      ts.isInterfaceDeclaration(decl) ||
      ts.isClassLike(decl) ||
      ts.isTypeLiteralNode(decl) ||
      ts.isEnumDeclaration(decl)
    ) {
      for (const member of decl.members as ts.NodeArray<ts.Node>) {
        if (
          ts.isConstructorDeclaration(member) ||
          ts.isIndexSignatureDeclaration(member) ||
          ts.isCallSignatureDeclaration(member) ||
          ts.isConstructSignatureDeclaration(member) ||
          ts.isClassStaticBlockDeclaration(member) ||
          ts.isSemicolonClassElement(member) ||
          isPrivate(member)
        ) {
          if (ts.isIndexSignatureDeclaration(member) || ts.isCallSignatureDeclaration(member)) {
            types(entry, name, member);
          }
          continue;
        }
        const symbol = symbolOf(member);
        const memberName = (member as unknown as { name: ts.Node }).name.getText();
        if (symbol) visit(entry, `${name}.${memberName}`, symbol);
      }
      if (ts.isClassLike(decl) || ts.isInterfaceDeclaration(decl)) {
        for (const clause of decl.heritageClauses ?? []) for (const t of clause.types) types(entry, name, t);
      }
      return;
    }
    types(entry, name, decl);
  };

  /** Finds the type literals in a declaration's type annotation, parameters and return type. */
  const types = (entry: string, name: string, node: ts.Node): void => {
    const look = (n: ts.Node | undefined): void => {
      if (!n || ts.isBlock(n) || ts.isExpression(n)) return;
      if (ts.isTypeLiteralNode(n)) walk(entry, name, n);
      else if (ts.isConditionalTypeNode(n)) {
        // `C extends { x: ... } ? A : B`: the pattern is a test, not a type a user holds.
        look(n.trueType);
        look(n.falseType);
      } else if (ts.isParameter(n) || ts.isVariableDeclaration(n) || ts.isPropertySignature(n)) look(n.type);
      else if (ts.isPropertyDeclaration(n)) look(n.type);
      else ts.forEachChild(n, look);
    };
    if (ts.isVariableDeclaration(node) || ts.isPropertyDeclaration(node) || ts.isPropertySignature(node))
      look(node.type);
    else ts.forEachChild(node, look);
  };

  const exported = (entry: string, name: string, symbol: ts.Symbol): void => {
    const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
    visit(entry, target.name === 'default' ? name : target.name, target);
  };

  for (const entry of entries) {
    const source = program.getSourceFile(entry.file);
    if (!source) throw new Error(`${entry.label}: ${entry.file} is not in the program`);
    const moduleSymbol = checker.getSymbolAtLocation(source);
    if (!moduleSymbol) continue;
    for (const symbol of checker.getExportsOfModule(moduleSymbol)) exported(entry.label, symbol.name, symbol);
  }
  return missing;
}
