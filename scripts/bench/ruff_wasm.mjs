// Lint every .py file under the given directories with Ruff's WebAssembly build
// (@astral-sh/ruff-wasm-nodejs, pinned in scripts/bench/package.json), pyflakes rules only
// (select = ["F"]), one file at a time on one thread, and print counts.
//
// Usage: node scripts/bench/ruff_wasm.mjs DIR...
// Prints: "files=N bytes=B diagnostics=D syntax_errors=S skipped=K" (diagnostics excludes syntax errors).
//
// The package's API (read from node_modules/@astral-sh/ruff-wasm-nodejs/ruff_wasm.d.ts and ruff_wasm.js):
// a CommonJS module that instantiates the wasm synchronously at require time and exports
// `new Workspace(options, positionEncoding)` (options: Ruff settings as in ruff.toml/pyproject,
// e.g. {lint: {select: [...]}}; positionEncoding: PositionEncoding.Utf8|Utf16|Utf32) and
// `workspace.check(contents: string) -> Diagnostic[]` (syntax errors come back with code
// "invalid-syntax"). There is no file-system access in the wasm build: this script walks the
// directories and reads the files itself, with shardlint's discovery rules (hidden folders,
// node_modules, __pycache__, build, dist, site-packages, venv, env, __pypackages__, _build,
// buck-out, htmlcov, *.egg-info and virtual environments are skipped) and shardlint's
// skips (files over 2 MiB, with NUL bytes, or not UTF-8), so it sees the same files.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const require = createRequire(import.meta.url);
const { Workspace, PositionEncoding } = require("@astral-sh/ruff-wasm-nodejs");

const SKIPPED = new Set(["node_modules", "__pycache__", "build", "dist", "site-packages", "venv", "env",
  "__pypackages__", "_build", "buck-out", "htmlcov"]);
const MAX_FILE_BYTES = 2 * 1024 * 1024;

function skipDirectory(dir, name) {
  if (name.length > 1 && name.startsWith(".")) return true;
  if (SKIPPED.has(name)) return true;
  if (name.length > 9 && name.endsWith(".egg-info")) return true;
  return fs.existsSync(path.join(dir, "pyvenv.cfg"));
}

function* walk(dir) {
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (!skipDirectory(p, e.name)) yield* walk(p);
    } else if (e.name.endsWith(".py")) {
      if (e.isFile()) yield p;
      else if (e.isSymbolicLink()) {
        try { if (fs.statSync(p).isFile()) yield p; } catch { /* dangling link */ }
      }
    }
  }
}

const args = process.argv.slice(2);
if (args.length === 0) {
  console.error("usage: node ruff_wasm.mjs DIR...");
  process.exit(2);
}

const workspace = new Workspace({ lint: { select: ["F"] } }, PositionEncoding.Utf8);
const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
let files = 0, bytes = 0, diagnostics = 0, syntaxErrors = 0, skipped = 0;

function lint(file) {
  let buf;
  try {
    buf = fs.readFileSync(file);
  } catch {
    skipped++;
    return;
  }
  if (buf.length > MAX_FILE_BYTES || buf.includes(0)) {
    skipped++;
    return;
  }
  let text;
  try {
    text = decoder.decode(buf);
  } catch {
    skipped++;
    return;
  }
  const found = workspace.check(text);
  for (const d of found) {
    if (d.code === "invalid-syntax") syntaxErrors++;
    else diagnostics++;
  }
  files++;
  bytes += buf.length;
}

for (const a of args) {
  let st;
  try {
    st = fs.statSync(a);
  } catch {
    console.error(`ruff_wasm: no such path: ${a}`);
    process.exit(2);
  }
  if (st.isDirectory()) for (const f of walk(a)) lint(f);
  else lint(a);
}
console.log(`files=${files} bytes=${bytes} diagnostics=${diagnostics} syntax_errors=${syntaxErrors} skipped=${skipped}`);
