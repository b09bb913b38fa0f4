// Bundles the web explorer into openkl/data/web/: the pinned libraries from node_modules,
// then the app. Run `npm ci && node build.mjs` here; the output is committed.
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";

const here = new URL(".", import.meta.url);
const out = new URL("../openkl/data/web/", here);
const lock = JSON.parse(readFileSync(new URL("package-lock.json", here)));
const libs = [["cytoscape", "dist/cytoscape.min.js"]];

mkdirSync(out, { recursive: true });
const names = libs.map(([n]) => `${n}@${lock.packages[`node_modules/${n}`].version}`);
const parts = libs.map(([n, f]) => readFileSync(new URL(`node_modules/${n}/${f}`, here), "utf8"));
parts.push(readFileSync(new URL("src/app.js", here), "utf8"));
writeFileSync(new URL("app.js", out), `/* openkl web bundle: ${names.join(" ")} */\n` + parts.join("\n;\n"));
for (const f of ["app.css", "index.html"]) {
  writeFileSync(new URL(f, out), readFileSync(new URL(`src/${f}`, here), "utf8"));
}
console.log(`wrote ${out.pathname} with ${names.join(", ")}`);
