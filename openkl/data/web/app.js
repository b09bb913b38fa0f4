/* openkl web explorer: hash routes over the HTTP API of `ok serve`. */
(function () {
  "use strict";
  var MAX_QUERY = 100000; // characters a query may have (openkl.graph.search.MAX_QUERY)
  var KEY = "openkl.key";
  var data = window.OK_DATA || null; // set in an exported page: no server behind it
  var view = document.getElementById("view");
  var notice = document.getElementById("notice");
  var stackSel = document.getElementById("stack");
  var PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  var typeColour = {};

  function colour(type) {
    if (!(type in typeColour)) typeColour[type] = PALETTE[Object.keys(typeColour).length % PALETTE.length];
    return typeColour[type];
  }

  function el(tag, attrs) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k];
      else if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), attrs[k]);
      else if (attrs[k] !== null && attrs[k] !== undefined && attrs[k] !== false) e.setAttribute(k, attrs[k]);
    });
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined) continue;
      (Array.isArray(c) ? c : [c]).forEach(function (x) {
        e.appendChild(typeof x === "string" ? document.createTextNode(x) : x);
      });
    }
    return e;
  }

  function say(message) {
    notice.textContent = message;
    notice.hidden = !message;
  }

  function Problem(message, status) { this.message = message; this.status = status; }

  function stack() { return stackSel.value; }

  function api(path, opts) {
    opts = opts || {};
    var headers = { Accept: "application/json" };
    var key = localStorage.getItem(KEY);
    if (key) headers.Authorization = "Bearer " + key;
    if (opts.body !== undefined) headers["Content-Type"] = "application/json";
    return fetch(path, {
      method: opts.method || (opts.body !== undefined ? "POST" : "GET"),
      headers: headers,
      body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
    }).then(function (r) {
      return r.text().then(function (t) {
        var body = null;
        try { body = t ? JSON.parse(t) : null; } catch (e) { body = null; }
        if (r.status === 401) {
          askKey(body && body.error);
          throw new Problem("This server needs a key: enter it above.", 401);
        }
        if (!r.ok) {
          var msg = body && body.error ? body.error : "the server answered " + r.status;
          if (body && body.hint) msg += " (" + body.hint + ")";
          throw new Problem(msg, r.status);
        }
        return body;
      });
    }, function () {
      throw new Problem("The server cannot be reached: is `ok serve` running?", 0);
    });
  }

  function askKey(why) {
    if (document.getElementById("keyform")) return;
    var input = el("input", { type: "password", id: "key", "aria-label": "key", placeholder: "ok-…" });
    var form = el("form", { id: "keyform", class: "bar card", onsubmit: function (ev) {
      ev.preventDefault();
      localStorage.setItem(KEY, input.value.trim());
      form.remove();
      start();
    } }, el("label", {}, "Key for this server (" + (why || "credentials needed") +
      "); make one with `ok serve keys add NAME`", input), el("button", { class: "primary" }, "Use key"));
    document.body.insertBefore(form, view);
    input.focus();
  }

  function failed(e) {
    say(e instanceof Problem ? e.message : "Something went wrong: " + e);
  }

  function params() {
    var h = location.hash.replace(/^#\/?/, "");
    var i = h.indexOf("?");
    var route = decodeURIComponent(i < 0 ? h : h.slice(0, i));
    return { route: route, q: new URLSearchParams(i < 0 ? "" : h.slice(i + 1)) };
  }

  function go(route, q) {
    var s = q ? new URLSearchParams(q).toString() : "";
    location.hash = "#/" + route + (s ? "?" + s : "");
  }

  // `about`: what was looked for (a query, an entity's name): its best sentence in the
  // passage is marked, the passage around it shaded
  function docLink(docId, loc, text, about) {
    var q = { };
    if (loc && loc.kind === "char") { q.start = loc.start; q.end = loc.end; }
    if (about) q.q = about;
    return el("a", { href: "#/doc/" + encodeURIComponent(docId) + "?" + new URLSearchParams(q) }, text);
  }

  // -- the best sentence of a passage: the one holding the most of the words looked for ----
  var STOP = { the: 1, and: 1, for: 1, are: 1, was: 1, were: 1, who: 1, what: 1, when: 1,
    how: 1, why: 1, which: 1, with: 1, that: 1, this: 1, from: 1, does: 1, did: 1, has: 1,
    have: 1, had: 1, its: 1, into: 1, can: 1, not: 1, but: 1, all: 1, any: 1, there: 1 };

  function keys(text) {  // words of 3 letters or more, cut to 5 so that forms meet
    var out = {}, m, re = /[\p{L}\p{N}]{3,}/gu;
    while ((m = re.exec(text.toLowerCase()))) if (!STOP[m[0]]) out[m[0].slice(0, 5)] = 1;
    return out;
  }

  function sentences(text) {  // [start, end] of each sentence: ends at . ! ? or a line break
    var out = [], re = /[.!?]+(?=\s)|\n\s*\n|\n(?=\s*(?:#|[-*+]\s|\d+[.)]\s))/g, at = 0, m;
    function add(a, b) {
      while (a < b && /\s/.test(text[a])) a++;
      while (b > a && /\s/.test(text[b - 1])) b--;
      if (b > a) out.push([a, b]);
    }
    while ((m = re.exec(text))) { add(at, m.index + (m[0][0] === "\n" ? 0 : m[0].length)); at = m.index + m[0].length; }
    add(at, text.length);
    return out;
  }

  function bestSentence(text, about) {
    var want = keys(about || ""), best = null, most = 0;
    if (!Object.keys(want).length) return null;
    sentences(text).forEach(function (sp) {
      var got = keys(text.slice(sp[0], sp[1])), n = 0;
      for (var k in want) if (got[k]) n++;
      if (n > most) { most = n; best = sp; }
    });
    return best;
  }

  function statusLine(r) {
    var box = el("span", { class: "verify-result" },
      el("span", { class: "status " + r.status, text: r.status }));
    if (r.found && r.found.loc && r.status !== "verified") {
      var l = r.found.loc;
      box.appendChild(document.createTextNode(" now at " + (r.found.path || r.found.doc_id) +
        " " + l.kind + " " + l.start + "–" + l.end + " "));
      if (r.found.doc_id) box.appendChild(docLink(r.found.doc_id, l, "open"));
    }
    if (r.similarity !== undefined && r.similarity !== null && r.status !== "verified")
      box.appendChild(document.createTextNode(" (similarity " + r.similarity.toFixed(2) + ")"));
    return box;
  }

  function verifyButton(item) {
    var out = el("span");
    var b = el("button", { type: "button", class: "verify", onclick: function () {
      out.textContent = "checking…";
      api("/v1/" + stack() + "/citations/verify", { body: { items: [item] } }).then(function (v) {
        out.textContent = "";
        out.appendChild(statusLine(v.results[0]));
      }, function (e) { out.textContent = ""; failed(e); });
    } }, "Verify");
    return [b, out];
  }

  // -- search ---------------------------------------------------------------------------
  function searchView(q) {
    var input = el("input", { type: "search", name: "q", id: "q", "aria-label": "query",
      placeholder: "Search the knowledge", value: q.get("q") || "" });
    function field(name, label, type) {
      return el("label", {}, label, el("input", { name: name, type: type || "text", value: q.get(name) || "" }));
    }
    var scope = el("select", { name: "scope" }, ["all", "store", "mem"].map(function (s) {
      return el("option", { value: s, selected: (q.get("scope") || "all") === s ? "" : null }, s);
    }));
    var explain = el("input", { type: "checkbox", name: "explain", checked: q.get("explain") ? "" : null });
    var results = el("section", { id: "results", "aria-live": "polite" });
    var form = el("form", { class: "bar", role: "search", onsubmit: function (ev) {
      ev.preventDefault();
      var f = new FormData(form), o = {};
      f.forEach(function (v, k) { if (v) o[k] = v; });
      go("search", o);
    } }, el("label", { class: "grow" }, "query", input), el("button", { class: "primary" }, "Search"),
      el("details", { class: "filters", open: ["tag", "topic", "path", "since", "until"].some(function (k) { return q.get(k); }) ? "" : null },
        el("summary", {}, "Filters"),
        el("div", {}, el("label", {}, "scope", scope), field("tag", "tag"), field("topic", "topic"),
          field("path", "path (glob)"), field("since", "since", "date"), field("until", "until", "date"),
          el("label", {}, "per-signal scores", explain))));
    view.replaceChildren(form, results);
    if (!q.has("q")) return input.focus();
    var text = (q.get("q") || "").trim();
    if (!text) return say("Type something to search for: the query is empty.");
    if (text.length > MAX_QUERY)
      return say("The query is " + text.length + " characters long; keep it under " + MAX_QUERY + ".");
    var p = new URLSearchParams({ q: text, k: "10" });
    ["scope", "tag", "topic", "path", "since", "until"].forEach(function (k) { if (q.get(k)) p.set(k, q.get(k)); });
    if (q.get("explain")) p.set("explain", "true");
    results.textContent = "searching…";
    api("/v1/" + stack() + "/search?" + p).then(function (res) {
      results.replaceChildren();
      if (res.warning) results.appendChild(el("p", { class: "meta" }, "Note: " + res.warning + "."));
      if (res.no_good_match)
        results.appendChild(el("p", { class: "empty" }, "Nothing matches well (best score " +
          (res.best_score || 0).toFixed(2) + "); these are the nearest."));
      if (!res.hits.length) results.appendChild(el("p", { class: "empty" }, "No results."));
      results.appendChild(el("p", { class: "meta" },
        el("a", { href: "#/graph?" + new URLSearchParams({ query: text }) }, "Show the entities of these results as a graph")));
      res.hits.forEach(function (h) { results.appendChild(hitCard(h, text)); });
    }, function (e) { results.replaceChildren(); failed(e); });
  }

  function hitCard(h, query) {
    var title = h.type === "chunk" && h.doc_id ? docLink(h.doc_id, h.loc, h.title || h.path, query)
      : h.type === "memory" ? el("a", { href: "#/note/" + encodeURIComponent(h.id) }, h.title || h.id)
      : el("span", {}, h.title || h.id);
    var card = el("article", { class: "hit" }, el("h3", {}, title),
      el("div", { class: "meta" }, (h.path || "") + " · score " + (h.score || 0).toFixed(3) + " · rank " + h.rank),
      el("div", { class: "quote" }, h.quote || ""),
      el("div", { class: "actions" }, verifyButton(h)));
    if (h.explain || h.signals) {
      var sig = h.explain || h.signals;
      card.appendChild(el("details", { class: "signals", open: "" }, el("summary", {}, "scores by signal"),
        el("pre", { class: "meta" }, JSON.stringify(sig, null, 1))));
    }
    return card;
  }

  // -- document -------------------------------------------------------------------------
  function docView(id, q) {
    view.replaceChildren(el("p", {}, "loading…"));
    Promise.all([api("/v1/" + stack() + "/documents/" + encodeURIComponent(id)),
      api("/v1/" + stack() + "/documents/" + encodeURIComponent(id) + "/history")]).then(function (got) {
      var d = got[0], versions = got[1], e = d.entry, text = d.text;
      var s = parseInt(q.get("start"), 10), t = parseInt(q.get("end"), 10);
      var pre = el("pre", { class: "doc", tabindex: "0" });
      var mark = null;
      if (s >= 0 && t > s && t <= text.length) {
        // the passage shaded lightly, its best sentence marked; a passage of one sentence,
        // or one with nothing looked for, is marked whole
        var passage = text.slice(s, t), best = bestSentence(passage, q.get("q"));
        if (!best && sentences(passage).length <= 1) best = [0, passage.length];
        var quoted = el("span", { id: "quoted", class: "passage" });
        if (best) {
          mark = el("mark", { class: "best" }, passage.slice(best[0], best[1]));
          quoted.append(passage.slice(0, best[0]), mark, passage.slice(best[1]));
        } else quoted.textContent = passage;
        pre.append(text.slice(0, s), quoted, text.slice(t));
        mark = mark || quoted;
      } else pre.textContent = text;
      var policy = e.refresh ? JSON.stringify(e.refresh) : "none (refresh it with `ok refresh`; set a policy with `ok store policy`)";
      view.replaceChildren(
        el("h2", {}, e.title || e.path),
        el("p", { class: "meta" }, e.path + " · " + (e.media_type || "") + " · ingested " + (e.ingested_at || "?") +
          (e.current === false ? " · superseded" : "")),
        el("p", { class: "meta refresh" }, "Refresh policy: " + policy),
        e.refresh_error ? el("p", { class: "why refresh-error" }, "Refresh failing: " + e.refresh_error.error + " (" + streak(e.refresh_error) + ")") : null,
        pre, versionsPart(versions));
      if (mark) mark.scrollIntoView({ block: "center" });
    }, failed);
  }

  function versionsPart(versions) {
    var box = el("section", { id: "versions" }, el("h3", {}, "Versions (" + versions.length + ")"));
    var rows = versions.map(function (v, i) {
      return el("tr", {}, el("td", {}, el("input", { type: "checkbox", name: "pick", value: v.id, "aria-label": "compare " + v.id, checked: i < 2 ? "" : null })),
        el("td", {}, el("a", { href: "#/doc/" + v.id }, v.id)), el("td", {}, v.current ? "current" : "superseded " + (v.superseded_at || "")),
        el("td", {}, v.fetched_at || v.ingested_at || ""), el("td", {}, v.drift === null || v.drift === undefined ? "–" : v.drift.toFixed(3)));
    });
    box.appendChild(el("div", { class: "scroll" }, el("table", {}, el("tr", {}, ["", "version", "state", "fetched", "drift"].map(function (h) { return el("th", {}, h); })), rows)));
    box.appendChild(driftPlot(versions));
    var out = el("div", { id: "diff" });
    if (versions.length > 1) box.appendChild(el("button", { type: "button", onclick: function () {
      var picked = Array.prototype.map.call(box.querySelectorAll("input[name=pick]:checked"), function (x) { return x.value; });
      if (picked.length !== 2) return say("Pick two versions to compare.");
      Promise.all(picked.map(function (p) { return api("/v1/" + stack() + "/documents/" + p); })).then(function (two) {
        out.replaceChildren(diffView(two[1].text, two[0].text));
      }, failed);
    } }, "Diff the two picked versions"));
    box.appendChild(out);
    return box;
  }

  function diffView(a, b) {
    var x = a.split("\n"), y = b.split("\n"), n = x.length, m = y.length;
    if (n * m > 4e6) return el("p", { class: "empty" }, "These versions are too long to compare here.");
    var L = [];
    for (var i = n; i >= 0; i--) {
      L[i] = new Uint32Array(m + 1);
      for (var j = m - 1; j >= 0 && i < n; j--) L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    }
    var out = el("div", { class: "diff card" });
    i = 0; j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && x[i] === y[j]) { out.appendChild(el("div", {}, "  " + x[i])); i++; j++; }
      else if (j < m && (i === n || L[i][j + 1] > L[i + 1][j])) { out.appendChild(el("div", { class: "add" }, "+ " + y[j])); j++; }
      else { out.appendChild(el("div", { class: "del" }, "- " + x[i])); i++; }
    }
    return out;
  }

  function driftPlot(versions) {
    var pts = versions.filter(function (v) { return typeof v.drift === "number"; }).map(function (v) {
      return { t: Date.parse(v.fetched_at || v.ingested_at), d: v.drift };
    }).filter(function (p) { return !isNaN(p.t); }).sort(function (a, b) { return a.t - b.t; });
    if (!pts.length) return el("p", { class: "empty", id: "drift" }, "No drift yet: the document has one version.");
    var NS = "http://www.w3.org/2000/svg", W = 600, H = 180, P = 30;
    var svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + H); svg.setAttribute("class", "plot"); svg.id = "drift";
    svg.setAttribute("role", "img"); svg.setAttribute("aria-label", "drift over time");
    var t0 = pts[0].t, t1 = Math.max(pts[pts.length - 1].t, t0 + 1), dmax = Math.max(0.05, Math.max.apply(null, pts.map(function (p) { return p.d; })));
    function X(t) { return P + (W - 2 * P) * (pts.length === 1 ? 0.5 : (t - t0) / (t1 - t0)); }
    function Y(d) { return H - P - (H - 2 * P) * d / dmax; }
    function add(tag, a, txt) { var e = document.createElementNS(NS, tag); Object.keys(a).forEach(function (k) { e.setAttribute(k, a[k]); }); if (txt) e.textContent = txt; svg.appendChild(e); }
    add("line", { x1: P, y1: H - P, x2: W - P, y2: H - P, stroke: "currentColor", opacity: 0.3 });
    add("text", { x: 2, y: P - 8 }, "drift " + dmax.toFixed(2));
    add("text", { x: P, y: H - 8 }, new Date(t0).toISOString().slice(0, 10));
    add("polyline", { points: pts.map(function (p) { return X(p.t) + "," + Y(p.d); }).join(" "), fill: "none", stroke: "#e15759", "stroke-width": 2 });
    pts.forEach(function (p) { add("circle", { cx: X(p.t), cy: Y(p.d), r: 4, fill: "#e15759" }); });
    return svg;
  }

  function noteView(id) {
    view.replaceChildren(el("p", {}, "loading…"));
    api("/v1/" + stack() + "/notes/" + encodeURIComponent(id)).then(function (n) {
      function refs(label, ids) {
        return ids.length ? el("p", { class: "meta" }, label + ": ", ids.map(function (x, i) {
          return [i ? ", " : "", el("a", { href: "#/note/" + encodeURIComponent(x.id || x) }, x.title || x.id || x)];
        })) : "";
      }
      view.replaceChildren(el("h2", {}, "Note " + n.id),
        el("p", { class: "meta" }, n.path + " · " + n.ts + (n.tags.length ? " · tags " + n.tags.join(", ") : "") +
          (n.topics.length ? " · topics " + n.topics.join(", ") : "")),
        el("pre", { class: "doc", tabindex: "0" }, n.text), refs("links to", n.links || []), refs("linked from", n.backlinks || []));
    }, failed);
  }

  // -- graph ----------------------------------------------------------------------------
  var cy = null;
  var LABEL_PX = 12; // a label's size on screen, whatever the zoom
  var MAX_LABELS = 24; // names shown at once; the rest on hover

  // how much a node matters in the drawing: a seed most, then by its relationships and
  // its confidence
  function weight(n) {
    return (n.hasClass("seed") ? 1000 : 0) + n.degree(false) + n.data("confidence");
  }

  // name the most important nodes whose labels do not cover each other at this zoom
  function placeLabels() {
    if (!cy) return;
    cy.style().update(); // the labels' size follows the zoom
    var taken = [], named = 0;
    var nodes = cy.nodes().filter(function (n) { return n.style("display") !== "none"; })
      .sort(function (a, b) { return weight(b) - weight(a); });
    cy.nodes().removeClass("named");
    nodes.forEach(function (n) {
      if (named >= MAX_LABELS) return;
      n.addClass("named");
      var bb = n.renderedBoundingBox({ includeNodes: false, includeEdges: false, includeLabels: true });
      var clash = taken.some(function (t) { return bb.x1 < t.x2 && t.x1 < bb.x2 && bb.y1 < t.y2 && t.y1 < bb.y2; });
      if (clash) return n.removeClass("named");
      taken.push(bb);
      named++;
    });
    cy.scratch("labelled", cy.zoom()); // the zoom the names were placed for
  }

  function graphView(q) {
    var entity = q.get("entity") || "", query = q.get("query") || "";
    var chosen = q.get("min"); // the floor asked for; else the folder's (entities.min_confidence)
    var input = el("input", { type: "search", name: "entity", "aria-label": "entity", placeholder: "An entity, e.g. Cas9", value: entity });
    var depth = el("select", { name: "depth", "aria-label": "depth" }, ["1", "2", "3"].map(function (d) { return el("option", { selected: (q.get("depth") || "1") === d ? "" : null }, d); }));
    var conf = el("input", { type: "range", name: "min", min: "0", max: "1", step: "0.05", value: chosen || "0", "aria-label": "minimum confidence" });
    var confOut = el("output", { id: "min-out" }, chosen || "…");
    var side = el("aside", { class: "side" });
    var status = el("p", { class: "meta", id: "graph-status" });
    var box = el("div", { id: "cy", role: "img", "aria-label": "entity graph" });
    var form = el("form", { class: "bar", onsubmit: function (ev) {
      ev.preventDefault();
      if (data) return;
      var v = input.value.trim();
      if (!v) return say("Name an entity to start from, e.g. one from a search.");
      var o = { entity: v, depth: depth.value };
      if (chosen) o.min = chosen;
      go("graph", o);
    } }, el("label", { class: "grow" }, "entity", input), el("label", {}, "depth", depth),
      el("label", {}, "min confidence", conf, confOut), el("button", { class: "primary" }, "Show"));
    form.hidden = !!data; // an exported page holds one neighbourhood and no server to ask
    var about = data ? data.neighbourhood.query : query;
    var title = about ? el("h2", { id: "graph-query" }, "Entities of the search “" + about + "”",
      data ? null : el("a", { class: "meta", href: "#/search?" + new URLSearchParams({ q: about }) }, " back to its results")) : null;
    view.replaceChildren(title || "", form, status, el("div", { class: "graph-wrap" }, box, side));
    conf.addEventListener("input", function () { chosen = conf.value; confOut.textContent = conf.value; filter(); });
    var hidden = {};

    function filter() {
      if (!cy) return;
      var min = parseFloat(conf.value);
      cy.batch(function () {
        cy.nodes().forEach(function (n) { n.style("display", hidden[n.data("type")] || n.data("confidence") < min ? "none" : "element"); });
        cy.edges().forEach(function (e) { e.style("display", e.data("confidence") < min ? "none" : "element"); });
      });
      placeLabels();
    }

    function render(nb, more) {
      if (!chosen && !more) { conf.value = String(nb.min_confidence); confOut.textContent = conf.value; }
      if (!cy) {
        cy = window.cytoscape({ container: box, wheelSensitivity: 0.3, style: [
          { selector: "node", style: { "background-color": "data(colour)", label: "", "font-size": function (e) { return LABEL_PX / e.cy().zoom(); },
            color: getComputedStyle(document.body).color, "text-valign": "bottom", "text-margin-y": 2,
            "text-background-color": getComputedStyle(document.querySelector("#cy")).backgroundColor,
            "text-background-opacity": 0.8, "text-background-padding": 1,
            width: "mapData(confidence, 0, 1, 8, 18)", height: "mapData(confidence, 0, 1, 8, 18)" } },
          { selector: "node.named, node.hover", style: { label: "data(name)" } },
          { selector: "node.hover", style: { "z-index": 10, "font-weight": "bold" } },
          { selector: "node.seed", style: { "border-width": 3, "border-color": "#888" } },
          { selector: "edge", style: { width: 1.2, "line-color": "#999", "target-arrow-color": "#999", "target-arrow-shape": "triangle",
            "curve-style": "bezier", label: "", "font-size": function (e) { return (LABEL_PX - 2) / e.cy().zoom(); }, color: "#888", "text-rotation": "autorotate",
            "arrow-scale": 0.6, opacity: 0.7 } },
          { selector: "edge.hover", style: { label: "data(label)", opacity: 1, "line-color": "#555", "target-arrow-color": "#555" } },
        ] });
        cy.on("tap", "node", function (ev) { expand(ev.target.id()); });
        // the rest of the names, and what a node's relationships are, on hover
        cy.on("mouseover", "node", function (ev) { ev.target.addClass("hover"); ev.target.connectedEdges().addClass("hover"); });
        cy.on("mouseout", "node", function (ev) { ev.target.removeClass("hover"); ev.target.connectedEdges().removeClass("hover"); });
        var timer = null;
        cy.on("zoom pan", function () { clearTimeout(timer); timer = setTimeout(placeLabels, 60); });
        window.okGraph = cy;
      }
      cy.batch(function () {
        nb.nodes.forEach(function (n) {
          if (cy.getElementById(n.id).length) return;
          cy.add({ group: "nodes", data: { id: n.id, name: n.name, type: n.type, confidence: n.confidence, colour: colour(n.type) },
            classes: nb.seeds.indexOf(n.id) >= 0 && !more ? "seed" : "" });
        });
        nb.edges.forEach(function (r) {
          var id = r.from_id + "|" + r.type + "|" + r.to_id;
          if (cy.getElementById(id).length) return;
          cy.add({ group: "edges", data: { id: id, source: r.from_id, target: r.to_id, confidence: r.confidence,
            label: r.type.replace(/_/g, " ") + " " + r.confidence.toFixed(2) } });
        });
      });
      cy.layout({ name: "cose", animate: false, randomize: !more, nodeRepulsion: 400000, idealEdgeLength: 110, gravity: 0.2, padding: 20, numIter: cy.nodes().length > 300 ? 120 : 1000 }).run();
      if (nb.capped) say("Showing the nearest " + nb.limit + " entities only: raise the confidence or lower the depth to see the rest.");
      listSide();
      filter();
    }

    function listSide() {
      var types = {};
      cy.nodes().forEach(function (n) { types[n.data("type")] = (types[n.data("type")] || 0) + 1; });
      status.textContent = cy.nodes().length + " entities, " + cy.edges().length + " relationships at confidence " +
        conf.value + " or more. The most connected are named; point at an entity for its name, click it (or its ▸ below) to expand it.";
      var tbox = el("div", { class: "types" }, Object.keys(types).sort().map(function (t) {
        var c = el("input", { type: "checkbox", checked: hidden[t] ? null : "", "aria-label": "show " + t, onchange: function () { hidden[t] = !c.checked; filter(); } });
        return el("label", {}, c, el("span", { class: "dot", style: "background:" + colour(t) }), " " + t + " (" + types[t] + ")");
      }));
      var nodes = cy.nodes().sort(function (a, b) { return a.data("name").localeCompare(b.data("name")); });
      var list = el("ul", { id: "node-list" }, nodes.map(function (n) {
        return el("li", {}, el("button", { type: "button", class: "expand", title: "expand " + n.data("name"), "data-id": n.id(), onclick: function () { expand(n.id()); } }, "▸"),
          el("span", { class: "dot", style: "background:" + colour(n.data("type")) }),
          data ? el("span", {}, n.data("name")) : el("a", { href: "#/entity/" + encodeURIComponent(n.data("name")) }, n.data("name")));
      }));
      side.replaceChildren(el("h3", {}, "Types"), tbox, el("h3", {}, "Entities"), list);
    }

    function expand(id) {
      if (data) return say("This page was exported without a server: it cannot expand.");
      var p = new URLSearchParams({ entity: id, depth: "1", min_confidence: conf.value });
      api("/v1/" + stack() + "/neighbourhood?" + p).then(function (nb) { if (mine === shown) render(nb, true); }, failed);
    }

    var mine = shown;
    if (data) return render(data.neighbourhood, false);
    if (!entity && !query) {
      status.textContent = "Name an entity, or search and open the graph of its results.";
      return;
    }
    var p = new URLSearchParams({ depth: depth.value });
    if (entity) p.set("entity", entity); else p.set("query", query);
    if (q.get("limit")) p.set("limit", q.get("limit"));
    if (chosen) p.set("min_confidence", chosen);
    status.textContent = "loading…";
    api("/v1/" + stack() + "/neighbourhood?" + p).then(function (nb) {
      if (mine !== shown) return;
      if (!nb.nodes.length) { status.textContent = "No entities around " + (entity || "the results of “" + query + "”") + "."; return; }
      render(nb, false);
    }, function (e) { status.textContent = ""; failed(e); });
  }

  // -- entity ---------------------------------------------------------------------------
  function entityView(name) {
    view.replaceChildren(el("p", {}, "loading…"));
    var dom = "?domain=" + encodeURIComponent(stack());
    Promise.all([api("/aks/v1/entities/" + encodeURIComponent(name) + dom), api("/aks/v1/pages/" + encodeURIComponent(name) + dom)]).then(function (got) {
      var e = got[0], pg = got[1];
      var rels = el("ul", {}, e.relationships.map(function (r) {
        var other = r.direction === "out" ? r.to_name : r.from_name;
        var link = el("a", { href: "#/entity/" + encodeURIComponent(other) }, other), rel = r.type.replace(/_/g, " ");
        return el("li", {}, r.direction === "out" ? [rel + " → ", link] : [link, " " + rel + " this"], " (" + r.confidence.toFixed(2) + ") ",
          r.evidence && r.evidence.indexOf("#") > 0 ? evidenceLink(r.evidence) : null);
      }));
      var mentions = el("div", {}, e.mentions.map(function (m) {
        return el("div", { class: "card" }, el("div", { class: "meta" }, m.doc_id ? docLink(m.doc_id, m.loc, m.title || m.path, e.name) : m.title || m.id),
          el("div", { class: "quote" }, m.quote || ""));
      }));
      view.replaceChildren(el("h2", {}, e.name), el("p", { class: "meta" }, e.type + " · confidence " + e.confidence.toFixed(2) +
        (e.aliases.length ? " · also " + e.aliases.join(", ") : "")),
        el("p", {}, el("a", { href: "#/graph?" + new URLSearchParams({ entity: e.name }) }, "Show its neighbourhood")),
        e.description ? el("p", {}, e.description) : e.mention ? el("p", { class: "meta" }, "Named in: " + e.mention) : "",
        el("div", { class: "two" }, el("section", {}, el("h3", {}, "Relationships"), rels),
          el("section", {}, el("h3", {}, "Evidence"), mentions)),
        el("details", {}, el("summary", {}, "The entity's page (markdown)"), el("pre", { class: "doc" }, pg.markdown)));
    }, failed);
  }

  function evidenceLink(ref) {
    var m = /^([0-9a-f]+)#char(\d+)-(\d+)$/.exec(ref);
    return m ? docLink(m[1], { kind: "char", start: +m[2], end: +m[3] }, "evidence") : null;
  }

  // -- events and citations -------------------------------------------------------------
  // why something failed, or did not run, as an event or a document says it
  function streak(e) {
    var n = e.failures || 1;
    return n + (n === 1 ? " failure" : " failures in a row") + " since " + (e.since || e.at) +
      (e.retry_at ? "; due again after " + e.retry_at : "");
  }

  function eventLine(ev) {
    var what = ev.type + (ev.path ? " " + ev.path : "") + (typeof ev.drift === "number" ? " (drift " + ev.drift.toFixed(3) + ")" : "") + (ev.trigger ? " " + ev.trigger : "");
    var why = ev.error || ev.exec_waiting || null;
    if (ev.type === "refresh_recovered") why = "back after " + streak(ev) + " (last error: " + ev.error + ")";
    else if (ev.type === "refresh_failed" && ev.retry_at) why = ev.error + " · due again after " + ev.retry_at;
    var bad = /_failed$/.test(ev.type) || !!ev.exec_waiting;
    return el("li", { class: bad ? "failed" : null }, el("div", { class: "meta" }, ev.ts),
      ev.doc ? el("a", { href: "#/doc/" + ev.doc }, what) : what,
      why ? el("div", { class: "why" }, why) : null);
  }

  function eventsView() {
    var tl = el("ol", { class: "timeline", id: "timeline" });
    var cites = el("div", { id: "citations" });
    var failing = el("section", { id: "failing", hidden: "" }, el("h2", {}, "Sources failing to refresh"));
    view.replaceChildren(failing, el("div", { class: "two" }, el("section", {}, el("h2", {}, "Events"), tl),
      el("section", {}, el("h2", {}, "Citations"), cites)));
    api("/v1/" + stack() + "/documents").then(function (docs) {
      var bad = docs.filter(function (d) { return d.refresh_error; });
      if (!bad.length) return;
      var list = el("ul", { class: "failing" });
      bad.forEach(function (d) {
        list.appendChild(el("li", {}, el("a", { href: "#/doc/" + d.id }, d.title || d.path),
          el("div", { class: "why" }, d.refresh_error.error), el("div", { class: "meta" }, streak(d.refresh_error))));
      });
      failing.appendChild(list);
      failing.hidden = false;
    }, failed);
    api("/v1/" + stack() + "/events?limit=200").then(function (evs) {
      if (!evs.length) tl.appendChild(el("li", { class: "empty" }, "No events yet."));
      evs.slice().reverse().forEach(function (ev) { tl.appendChild(eventLine(ev)); });
    }, failed);
    api("/v1/" + stack() + "/citations").then(function (got) {
      if (!got.citations.length) return cites.appendChild(el("p", { class: "empty" }, "No citations kept yet (keep one with `ok cite make --persist`)."));
      var shownCites = got.citations.slice(0, 200), badges = {};
      if (got.citations.length > shownCites.length)
        cites.appendChild(el("p", { class: "meta" }, "The first 200 of " + got.citations.length + " citations; filter them with `ok cite list`."));
      shownCites.forEach(function (c) {
        badges[c.id] = el("span", { class: "status", text: "checking…" });
        cites.appendChild(el("div", { class: "card citation" },
          el("div", {}, el("strong", {}, c.title || c.id), " ", badges[c.id]),
          el("div", { class: "meta" }, c.id + " · ", c.doc_id ? docLink(c.doc_id, c.loc, c.path || c.doc_id) : c.path || ""),
          el("div", { class: "quote" }, c.quote || ""), el("div", { class: "actions" }, verifyButton(c.id))));
      });
      // their current status: one verification of them all
      api("/v1/" + stack() + "/citations/verify", { body: { items: shownCites.map(function (c) { return c.id; }) } }).then(function (v) {
        v.results.forEach(function (r, i) {
          var b = badges[shownCites[i].id];
          b.textContent = r.status;
          b.className = "status " + r.status;
        });
      }, failed);
    }, failed);
  }

  // -- routing --------------------------------------------------------------------------
  var shown = 0; // how many times a view was shown: a late answer for an older one is dropped
  var started = false;

  function show() {
    if (!started) return;
    shown++;
    if (cy) { cy.destroy(); cy = null; }
    say("");
    var p = params(), parts = p.route.split("/");
    document.querySelectorAll("nav a").forEach(function (a) {
      a.setAttribute("aria-current", a.getAttribute("href") === "#/" + parts[0] ? "page" : "false");
    });
    if (data) return graphView(p.q);
    if (parts[0] === "doc" && parts[1]) return docView(parts.slice(1).join("/"), p.q);
    if (parts[0] === "entity" && parts[1]) return entityView(parts.slice(1).join("/"));
    if (parts[0] === "note" && parts[1]) return noteView(parts.slice(1).join("/"));
    if (parts[0] === "graph") return graphView(p.q);
    if (parts[0] === "events") return eventsView();
    return searchView(p.q);
  }

  // keys: / search, j and k (or the arrows) from one hit to the next, Escape clears a message
  document.addEventListener("keydown", function (ev) {
    var typing = /INPUT|TEXTAREA|SELECT/.test(document.activeElement.tagName);
    if (ev.key === "Escape") return say("");
    if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "/") {
      ev.preventDefault();
      var box = document.getElementById("q");
      return box ? box.focus() : go("search");
    }
    var step = { j: 1, ArrowDown: 1, k: -1, ArrowUp: -1 }[ev.key];
    var links = Array.prototype.slice.call(document.querySelectorAll(".hit h3 a"));
    if (!step || !links.length) return;
    ev.preventDefault();
    var at = links.indexOf(document.activeElement);
    links[Math.max(0, Math.min(links.length - 1, at < 0 ? 0 : at + step))].focus();
  });

  function start() {
    if (data) {
      document.querySelector("nav").hidden = true;
      stackSel.replaceChildren(el("option", {}, data.stack));
      started = true;
      return show();
    }
    fetch("/ready").then(function (r) { return r.json(); }).then(function (r) {
      var stacks = r.stacks || [];
      var saved = sessionStorage.getItem("openkl.stack");
      stackSel.replaceChildren.apply(stackSel, stacks.map(function (s) { return el("option", { selected: s === saved ? "" : null }, s); }));
      if (!stacks.length) return say("The server is still opening its folders: reload in a moment.");
      api("/v1/" + stack() + "/status").then(function () { started = true; show(); },
        function (e) { if (e.status !== 401) { started = true; show(); failed(e); } });
    }, function () { say("The server cannot be reached: is `ok serve` running?"); });
  }
  stackSel.addEventListener("change", function () { sessionStorage.setItem("openkl.stack", stack()); show(); });
  window.addEventListener("hashchange", show);
  start();
})();
