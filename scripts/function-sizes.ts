/**
 * The largest functions of each folder given, by lines (first line to last, comments included):
 * `npx tsx scripts/function-sizes.ts src load scripts waiting-room/src test/support [--top N]`.
 * Issue 15 asks for the largest function in each folder before and after its redesign; this is
 * the measure, so the figure is the same whoever takes it. A function nested in another counts
 * on its own and inside its parent.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";

interface Sized {
  name: string;
  file: string;
  line: number;
  lines: number;
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    if (entry === "node_modules" || entry === "dist") continue;
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...filesUnder(path));
    else if (/\.(ts|mts|tsx)$/.test(entry) && !entry.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

function nameOf(node: ts.Node): string {
  if ((ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node)) && node.name) return node.name.getText();
  if (ts.isConstructorDeclaration(node)) return "constructor";
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent)) return parent.name.getText();
  if (parent && ts.isPropertyAssignment(parent)) return parent.name.getText();
  if (parent && ts.isPropertyDeclaration(parent)) return parent.name.getText();
  return "(anonymous)";
}

function functionsOf(file: string): Sized[] {
  const text = readFileSync(file, "utf8");
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: Sized[] = [];
  const visit = (node: ts.Node) => {
    if (
      ts.isFunctionDeclaration(node) ||
      ts.isMethodDeclaration(node) ||
      ts.isConstructorDeclaration(node) ||
      ts.isArrowFunction(node) ||
      ts.isFunctionExpression(node)
    ) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({ name: nameOf(node), file: relative(process.cwd(), file), line: start + 1, lines: end - start + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const args = process.argv.slice(2);
const topAt = args.indexOf("--top");
const top = topAt >= 0 ? Number(args[topAt + 1]) : 3;
const folders = args.filter((a, i) => a !== "--top" && i !== topAt + 1);
for (const folder of folders.length > 0 ? folders : ["src"]) {
  const all = filesUnder(folder)
    .flatMap(functionsOf)
    .sort((a, b) => b.lines - a.lines);
  console.log(`${folder}:`);
  for (const f of all.slice(0, top))
    console.log(`  ${String(f.lines).padStart(4)} lines  ${f.name}  ${f.file}:${f.line}`);
}
