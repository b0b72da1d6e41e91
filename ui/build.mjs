// Builds the console into one directory the controller serves at /ui/:
//   index.html (no inline script or style: the CSP forbids them) and assets/ with
//   content-hashed names, so the controller can cache them as immutable.
// Usage: node build.mjs [--out DIR]   (default: dist). Same sources, same bytes.
import { build } from "esbuild";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const i = process.argv.indexOf("--out");
const out = resolve(i > 0 ? process.argv[i + 1] : join(here, "dist"));

rmSync(join(out, "assets"), { recursive: true, force: true });
mkdirSync(join(out, "assets"), { recursive: true });
const res = await build({
  entryPoints: [join(here, "src/main.js")],
  bundle: true,
  format: "esm",
  target: "es2020",
  minify: true,
  sourcemap: false,
  legalComments: "none",
  entryNames: "[name]-[hash]",
  outdir: join(out, "assets"),
  metafile: true,
  logLevel: "warning",
});
let js = "", css = "";
for (const f of Object.keys(res.metafile.outputs)) {
  if (f.endsWith(".js")) js = basename(f);
  if (f.endsWith(".css")) css = basename(f);
}
if (!js || !css) throw new Error("esbuild produced no js or css");
const html = readFileSync(join(here, "index.html"), "utf8")
  .replace("%JS%", "assets/" + js)
  .replace("%CSS%", "assets/" + css);
writeFileSync(join(out, "index.html"), html);
writeFileSync(join(out, "favicon.svg"), readFileSync(join(here, "favicon.svg")));
console.log(`console built into ${out}: assets/${js}, assets/${css}`);
