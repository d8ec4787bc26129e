// paperlake explorer: search, paper pages and the map, drawn from the JSON API under /api/.
// Plain browser JavaScript, no libraries: the page is served whole by `paperlake explore`.
"use strict";

const $ = (selector) => document.querySelector(selector);
const SVG = "http://www.w3.org/2000/svg";
const GOLDEN_ANGLE = 137.50776405;
const state = {
  version: null, // the version every request reads
  defaultVersion: Number(document.body.dataset.defaultVersion),
  map: null, // the /api/map answer of state.version
  topics: new Map(), // topic_id -> label
  view: { k: 1, tx: 0, ty: 0 }, // zoom and pan of the map
};

// A colour per topic that never repeats: hues a golden angle apart, lightness in turn.
function topicColour(topicId) {
  if (topicId === null || topicId === undefined) return "#9aa1ad";
  const hue = (topicId * GOLDEN_ANGLE) % 360;
  const light = [45, 58, 36, 52, 40][topicId % 5];
  return `hsl(${hue.toFixed(1)}, 68%, ${light}%)`;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "style") node.style.cssText = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Replace a node's children, leaving out null, undefined and false.
function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

function showError(message) {
  const box = $("#error");
  box.textContent = message || "";
  box.hidden = !message;
}

async function api(path, params = {}) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") url.searchParams.set(key, value);
  }
  const response = await fetch(url);
  const body = await response.json().catch(() => ({ error: `${response.status} ${response.statusText}` }));
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

// Addresses: /?q=...&venue=...&year=...&topic=...&mode=...&v=N, /paper/<id>?v=N, /topic/<id>?v=N.
function here() {
  const params = new URLSearchParams(location.search);
  return { path: location.pathname, params };
}

function address(path, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") query.set(key, value);
  }
  if (state.version !== state.defaultVersion) query.set("v", state.version);
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

function go(url) {
  history.pushState(null, "", url);
  render();
}

function link(url, ...children) {
  return el("a", { href: url, "data-nav": true }, ...children);
}

document.addEventListener("click", (event) => {
  const anchor = event.target.closest("a[data-nav]");
  if (!anchor || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  go(anchor.getAttribute("href"));
});
window.addEventListener("popstate", render);

// Pieces of pages -------------------------------------------------------------------------

function topicChip(topicId, label) {
  if (topicId === null || topicId === undefined) return null;
  return link(address("/topic/" + topicId), el("span", {
    class: "chip", style: `--dot: ${topicColour(topicId)}`, title: "Topic: " + (label || ""),
  }, label || `topic ${topicId}`));
}

function authorsText(authors, most = 6) {
  if (!authors || authors.length === 0) return null;
  const shown = authors.slice(0, most).join(", ");
  return authors.length > most ? `${shown} and ${authors.length - most} more` : shown;
}

// The cosine of query (or paper) and hit where there is one, else the keyword score.
function scoreView(hit) {
  if (typeof hit.score === "number") {
    const width = Math.max(0, Math.min(1, hit.score)) * 100;
    return el("span", { class: "score", title: "cosine similarity" + (hit.bm25 ? `; bm25 ${hit.bm25}` : "") },
      el("span", { class: "gauge" }, el("i", { style: `width: ${width.toFixed(0)}%` })),
      `${hit.score.toFixed(2)}`);
  }
  if (typeof hit.bm25 === "number") return el("span", { class: "score", title: "keyword score (BM25)" }, `bm25 ${hit.bm25.toFixed(2)}`);
  return null;
}

function card(hit, extra = null) {
  const meta = el("div", { class: "meta" },
    [hit.venue, hit.year].filter((v) => v !== null && v !== undefined).join(" "),
    topicChip(hit.topic_id, hit.topic),
    hit.link ? el("a", { href: hit.link, target: "_blank", rel: "noopener" }, "paper ↗") : null,
    hit.code ? el("a", { href: hit.code, target: "_blank", rel: "noopener" }, "code ↗") : null,
    hit.good_match === false ? el("span", { class: "weak-tag", title: "not close to the query" }, "weak match") : null,
    extra,
    scoreView(hit));
  return el("li", { class: "hit", "data-paper": hit.paper_id },
    link(address("/paper/" + hit.paper_id),
      el("span", { class: "title" + (hit.untitled ? " untitled" : "") }, hit.title)),
    hit.authors && hit.authors.length ? el("div", { class: "meta" }, authorsText(hit.authors)) : null,
    meta,
    hit.abstract ? el("p", { class: "abstract" }, snippet(hit)) : null);
}

// An untitled paper is named by its abstract's first words: its snippet goes on from there.
function snippet(hit) {
  if (!hit.untitled) return hit.abstract;
  const named = hit.title.replace(/…$/, "");
  const rest = hit.abstract.startsWith(named) ? hit.abstract.slice(named.length).trim() : hit.abstract;
  return rest ? "…" + rest : "";
}

function hitList(hits, extra) {
  return el("ol", { class: "hits" }, hits.map((hit) => card(hit, extra ? extra(hit) : null)));
}

// Pages ----------------------------------------------------------------------------------

async function overviewPage() {
  const data = await api("/api/overview", { version: state.version });
  highlight([]);
  fill($("#content"),
    el("div", { class: "panel" },
      el("div", { class: "stats" },
        el("span", {}, el("b", {}, data.papers), "papers"),
        el("span", {}, el("b", {}, data.topics.length), "topics"),
        el("span", {}, el("b", {}, data.venues.length), data.venues.length === 1 ? "venue" : "venues"),
        el("span", {}, el("b", {}, `v${data.version}`), "version")),
      el("p", { class: "summary" },
        "Search by meaning or by words above, open a topic below, or click a point on the map.")),
    el("div", { class: "panel" }, el("h2", {}, "Topics"),
      el("div", { class: "topics" }, data.topics.map((t) =>
        link(address("/topic/" + t.topic_id), el("span", {
          class: "chip", style: `--dot: ${topicColour(t.topic_id)}`,
        }, `${t.label} · ${t.papers}`))))),
    data.venues.length ? el("div", { class: "panel" }, el("h2", {}, "Venues and years"),
      el("p", { class: "muted" },
        data.venues.map((v) => `${v.value} (${v.papers})`).join(", "), " · ",
        data.years.map((y) => `${y.value} (${y.papers})`).join(", "))) : null);
}

async function searchPage(params) {
  const query = Object.fromEntries(["q", "venue", "year", "topic", "mode"].map((k) => [k, params.get(k)]));
  fill($("#content"),el("p", { class: "summary" }, "Searching…"));
  const data = await api("/api/search", { ...query, version: state.version, k: 20 });
  highlight(data.hits.map((h) => h.paper_id));
  const filters = Object.entries(data.filters).filter(([, v]) => v !== null)
    .map(([k, v]) => (k === "topic" ? `topic “${state.topics.get(Number(v)) || v}”` : `${k} ${v}`));
  fill($("#content"),
    el("p", { class: "summary" },
      `${data.hits.length} papers for “${data.query}”`,
      filters.length ? ` (${filters.join(", ")})` : "", ` · ${data.took_ms} ms`),
    data.no_good_match ? el("div", { class: "weak" }, data.hits.length
      ? `No good match: ${data.why.replace(/^no good match: /, "")}. The closest papers follow.`
      : "Nothing matches the filters. Try fewer filters.") : null,
    hitList(data.hits));
}

async function paperPage(paperId) {
  const paper = await api("/api/paper/" + encodeURIComponent(paperId), { version: state.version });
  const ids = paper.nearest.map((n) => n.paper_id);
  highlight(ids, paper.paper_id);
  const facts = [paper.venue, paper.year, paper.decision].filter((v) => v !== null && v !== undefined);
  const sources = el("table", { class: "sources" },
    el("thead", {}, el("tr", {}, ["file", "format", "record", "line", "byte", "sha256"].map((h) => el("th", {}, h)))),
    el("tbody", {}, paper.sources.map((s) => el("tr", {},
      el("td", { class: "path" }, s.source_path, s.first ? "" : el("span", { class: "muted" }, " (again)")),
      el("td", {}, s.format || ""), el("td", {}, s.record_no), el("td", {}, s.line),
      el("td", {}, s.byte_offset), el("td", {}, el("code", { title: s.source_sha256 }, (s.source_sha256 || "").slice(0, 12)))))));
  fill($("#content"),
    el("article", { class: "panel paper", "data-paper": paper.paper_id },
      el("h1", { class: paper.untitled ? "untitled" : null }, paper.title),
      paper.untitled ? el("p", { class: "muted" }, "No title in the source: named by its abstract's first words.") : null,
      paper.authors && paper.authors.length ? el("p", { class: "authors" }, authorsText(paper.authors, 40)) : null,
      el("div", { class: "meta" }, facts.join(" · "), topicChip(paper.topic_id, paper.topic),
        el("code", { title: "paper id" }, paper.paper_id),
        paper.external_id ? el("span", {}, "id ", el("code", {}, paper.external_id)) : null,
        el("span", {}, `${paper.word_count} words`)),
      paper.links.length ? el("div", { class: "links" }, paper.links.map((l) =>
        el("a", { href: l.url, target: "_blank", rel: "noopener", title: l.url }, `${l.kind} ↗`))) : null,
      paper.keywords && paper.keywords.length ? el("p", { class: "keywords" }, "Keywords: " + paper.keywords.join(", ")) : null,
      el("p", { class: "full" }, paper.abstract)),
    el("section", { class: "panel compact", id: "nearest" },
      el("h2", {}, `${paper.nearest.length} nearest papers`),
      paper.nearest.length ? hitList(paper.nearest) : el("p", { class: "muted" }, "None.")),
    el("section", { class: "panel compact", id: "duplicates" },
      el("h2", {}, "Near-duplicates"),
      paper.duplicates.length
        ? hitList(paper.duplicates, (d) => el("span", {}, d.kind || `group of ${d.group_size}`))
        : el("p", { class: "muted" }, "None: no other paper of this version is a near-duplicate of it.")),
    el("section", { class: "panel", id: "sources" },
      el("h2", {}, paper.sources.length === 1 ? "Read from" : `Read from ${paper.sources.length} records`),
      sources));
  window.scrollTo(0, 0);
}

async function topicPage(topicId) {
  const topic = await api("/api/topic/" + encodeURIComponent(topicId), { version: state.version });
  highlight(topic.hits.map((h) => h.paper_id));
  fill($("#content"),
    el("div", { class: "panel" },
      el("h2", {}, el("span", { class: "chip", style: `--dot: ${topicColour(topic.topic_id)}` }, topic.label)),
      el("p", { class: "muted" }, `${topic.papers} papers · terms: ${(topic.terms || []).join(", ")}`),
      link(address("/", { topic: topic.topic_id, q: $("#q").value }), "Search within this topic")),
    el("div", { class: "compact" }, hitList(topic.hits)));
}

// The map ---------------------------------------------------------------------------------

function mapSize() {
  const box = $("#map").getBoundingClientRect();
  return { width: box.width || 600, height: box.height || 500 };
}

// Map coordinates lie in [-1, 1]; the square fits the panel with a margin.
function toScreen(x, y) {
  const { width, height } = mapSize();
  const half = Math.min(width, height) / 2 - 18;
  return [width / 2 + x * half, height / 2 - y * half];
}

function drawMap() {
  const svg = $("#map");
  const data = state.map;
  svg.replaceChildren();
  const g = document.createElementNS(SVG, "g");
  g.id = "points";
  const labelLayer = document.createElementNS(SVG, "g");
  labelLayer.id = "labels";
  const n = data.points.paper_id.length;
  for (let i = 0; i < n; i++) {
    const circle = document.createElementNS(SVG, "circle");
    const [cx, cy] = toScreen(data.points.x[i], data.points.y[i]);
    circle.setAttribute("cx", cx.toFixed(2));
    circle.setAttribute("cy", cy.toFixed(2));
    circle.setAttribute("r", "4");
    circle.setAttribute("fill", topicColour(data.points.topic_id[i]));
    circle.dataset.paper = data.points.paper_id[i];
    circle.dataset.index = i;
    g.append(circle);
  }
  for (const topic of data.topics) {
    if (topic.x === null) continue;
    const text = document.createElementNS(SVG, "text");
    text.textContent = topic.label.split(", ").slice(0, 2).join(", ");
    text.dataset.x = topic.x;
    text.dataset.y = topic.y;
    text.dataset.topic = topic.topic_id;
    labelLayer.append(text);
  }
  svg.append(g, labelLayer);
  svg.dataset.points = n;
  $("#map-caption").textContent = `Map of ${n} papers · ${data.topics.length} topics · v${data.version}`;
  applyView();
  if (state.highlighted) highlight(...state.highlighted);
}

// Zoom scales the points' group; radii and labels are redrawn to keep their screen size.
function applyView() {
  const { k, tx, ty } = state.view;
  const g = $("#points");
  if (!g) return;
  g.setAttribute("transform", `translate(${tx} ${ty}) scale(${k})`);
  const radius = (4 / Math.sqrt(k)).toFixed(3);
  for (const circle of g.children) {
    circle.setAttribute("r", circle.classList.contains("focus") ? (7 / Math.sqrt(k)).toFixed(3) : radius);
    circle.style.strokeWidth = (0.6 / k).toFixed(3);
  }
  for (const text of $("#labels").children) {
    const [x, y] = toScreen(Number(text.dataset.x), Number(text.dataset.y));
    text.setAttribute("x", (x * k + tx).toFixed(1));
    text.setAttribute("y", (y * k + ty).toFixed(1));
  }
}

function zoomAt(factor, px, py) {
  const view = state.view;
  const k = Math.min(40, Math.max(0.5, view.k * factor));
  const scale = k / view.k;
  view.tx = px - (px - view.tx) * scale;
  view.ty = py - (py - view.ty) * scale;
  view.k = k;
  applyView();
}

function highlight(ids, focus = null) {
  state.highlighted = [ids, focus];
  const svg = $("#map");
  const wanted = new Set(ids);
  svg.classList.toggle("focused", wanted.size > 0 || focus !== null);
  for (const circle of svg.querySelectorAll("circle")) {
    circle.classList.toggle("lit", wanted.has(circle.dataset.paper));
    circle.classList.toggle("focus", circle.dataset.paper === focus);
  }
  const chosen = svg.querySelector("circle.focus");
  if (chosen) chosen.parentNode.append(chosen); // drawn last: on top
  applyView();
}

function setupMap() {
  const svg = $("#map");
  const tip = $("#tip");
  let drag = null;
  svg.addEventListener("wheel", (event) => {
    event.preventDefault();
    const box = svg.getBoundingClientRect();
    zoomAt(event.deltaY < 0 ? 1.2 : 1 / 1.2, event.clientX - box.left, event.clientY - box.top);
  }, { passive: false });
  svg.addEventListener("pointerdown", (event) => {
    drag = { x: event.clientX, y: event.clientY, tx: state.view.tx, ty: state.view.ty, moved: false };
  });
  window.addEventListener("pointermove", (event) => {
    if (!drag) return;
    const dx = event.clientX - drag.x;
    const dy = event.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; svg.classList.add("dragging"); }
    state.view.tx = drag.tx + dx;
    state.view.ty = drag.ty + dy;
    applyView();
  });
  window.addEventListener("pointerup", () => {
    svg.classList.remove("dragging");
    setTimeout(() => { drag = null; }, 0);
  });
  svg.addEventListener("click", (event) => {
    const circle = event.target.closest("circle");
    if (!circle || (drag && drag.moved)) return;
    tip.hidden = true;
    go(address("/paper/" + circle.dataset.paper));
  });
  svg.addEventListener("mousemove", (event) => {
    const circle = event.target.closest("circle");
    if (!circle) { tip.hidden = true; return; }
    const i = Number(circle.dataset.index);
    const topicId = state.map.points.topic_id[i];
    tip.replaceChildren(state.map.points.title[i], el("small", {}, state.topics.get(topicId) || ""));
    tip.style.left = `${event.clientX + 12}px`;
    tip.style.top = `${event.clientY + 12}px`;
    tip.hidden = false;
  });
  svg.addEventListener("mouseleave", () => { tip.hidden = true; });
  const centre = () => { const { width, height } = mapSize(); return [width / 2, height / 2]; };
  $("#zoom-in").addEventListener("click", () => zoomAt(1.5, ...centre()));
  $("#zoom-out").addEventListener("click", () => zoomAt(1 / 1.5, ...centre()));
  $("#zoom-reset").addEventListener("click", () => { state.view = { k: 1, tx: 0, ty: 0 }; applyView(); });
  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => { if (state.map) drawMap(); }, 150);
  });
}

// Versions, filters and the router --------------------------------------------------------

async function loadVersion(version) {
  state.version = version;
  const [map, overview] = await Promise.all([
    api("/api/map", { version }), api("/api/overview", { version }),
  ]);
  state.map = map;
  state.topics = new Map(map.topics.map((t) => [t.topic_id, t.label]));
  fillSelect($("#venue"), "any venue", overview.venues.map((v) => [v.value, `${v.value} (${v.papers})`]));
  fillSelect($("#year"), "any year", overview.years.map((y) => [y.value, `${y.value} (${y.papers})`]));
  fillSelect($("#topic"), "any topic", overview.topics.map((t) => [t.topic_id, `${t.label} (${t.papers})`]));
  state.view = { k: 1, tx: 0, ty: 0 };
  drawMap();
}

function fillSelect(select, anyLabel, options) {
  const chosen = select.value;
  select.replaceChildren(el("option", { value: "" }, anyLabel),
    ...options.map(([value, label]) => el("option", { value }, label)));
  select.value = options.some(([value]) => String(value) === chosen) ? chosen : "";
}

async function render() {
  showError(null);
  const { path, params } = here();
  const wanted = params.has("v") ? Number(params.get("v")) : state.defaultVersion;
  try {
    if (wanted !== state.version) {
      $("#version").value = String(wanted);
      await loadVersion(wanted);
    }
    for (const key of ["q", "venue", "year", "topic", "mode"]) {
      const field = $("#" + key);
      field.value = params.get(key) || (key === "mode" ? "hybrid" : "");
    }
    if (path.startsWith("/paper/")) await paperPage(decodeURIComponent(path.slice(7)));
    else if (path.startsWith("/topic/")) await topicPage(decodeURIComponent(path.slice(7)));
    else if (params.get("q")) await searchPage(params);
    else await overviewPage();
  } catch (error) {
    showError(error.message);
    fill($("#content"),);
  }
}

async function start() {
  setupMap();
  $("#search").addEventListener("submit", (event) => {
    event.preventDefault();
    const fields = Object.fromEntries(["q", "venue", "year", "topic", "mode"].map((k) => [k, $("#" + k).value]));
    if (fields.mode === "hybrid") delete fields.mode;
    if (!fields.q.trim()) { showError("Type some words to search for."); return; }
    go(address("/", fields));
  });
  $("#version").addEventListener("change", (event) => {
    state.version = null; // reload the chosen version
    const version = Number(event.target.value);
    const { path, params } = here();
    if (version === state.defaultVersion) params.delete("v"); else params.set("v", version);
    const text = params.toString();
    go(text ? `${path}?${text}` : path);
  });
  try {
    const versions = await api("/api/versions");
    $("#version").replaceChildren(...versions.versions.map((v) =>
      el("option", { value: v.version }, `v${v.version} · ${v.published}${v.papers !== null ? ` · ${v.papers} papers` : ""}`)));
  } catch (error) {
    showError(error.message);
  }
  await render();
}

start();
