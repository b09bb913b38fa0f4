// Bundles the npm libraries the web explorer uses (pinned in package-lock.json) into
// openkl/data/web/vendor.js, whose first line names them with their versions. The page's own
// script, styles and shell are openkl/data/web/app.js, app.css and index.html.
// Run `npm ci && node build.mjs` here; the output is committed, so CI needs no npm.
import { readFileSync, writeFileSync } from "node:fs";

const here = new URL(".", import.meta.url);
const lock = JSON.parse(readFileSync(new URL("package-lock.json", here)));
const libs = [["cytoscape", "dist/cytoscape.min.js"]];

const names = libs.map(([n]) => `${n}@${lock.packages[`node_modules/${n}`].version}`);
const parts = libs.map(([n, f]) => readFileSync(new URL(`node_modules/${n}/${f}`, here), "utf8"));
const out = new URL("../openkl/data/web/vendor.js", here);
writeFileSync(out, `/* openkl web vendor bundle: ${names.join(" ")} */\n` + parts.join("\n;\n"));
console.log(`wrote ${out.pathname} with ${names.join(", ")}`);
