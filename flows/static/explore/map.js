// The map of papers: a dot per paper coloured by topic, venue or year, drawn on one canvas
// (points.js), a legend whose entries show or hide their papers, and topic labels placed
// where they neither overlap nor leave the panel (labels.js). Colours and names come from
// /api/map (flows/core/palette.py), whose columns of numbers the page reads as they come. A
// paper is known here by its index in the map's order: its id and title are asked for when
// one points at it (/api/map/paper), and the indexes of the papers a page lists when it
// marks them (/api/map/indexes).
"use strict";

import { $, address, api, apiBytes, el, go, pathOf, plural, showError, state } from "./common.js";
import { placeLabels } from "./labels.js";
import { PointLayer } from "./points.js";

const SVG = "http://www.w3.org/2000/svg";
const MODES = { topic: "topics", venue: "venues", year: "years" };
const TYPES = { float32: Float32Array, int16: Int16Array, int32: Int32Array };

export const map = {
  colourBy: "topic",
  hidden: { topic: new Set(), venue: new Set(), year: new Set() }, // legend keys switched off
  view: { k: 1, tx: 0, ty: 0 }, // zoom and pan
  highlighted: [[], null], // the ids of the papers marked and of the one ringed
  asked: 0, // highlights asked for: only the last one is drawn
  layer: null, // the PointLayer of state.map
  legends: {}, // colour-by -> its legend entries and each paper's entry, made once a version
  papers: new Map(), // index -> /api/map/paper's answer (a promise): id and title
  titles: new Map(), // index -> its paper's title, once /api/map/paper gave it
  indexes: new Map(), // paper_id -> its index on the map (-1: not on it), as /api/map/indexes gave it
};

// A version's map from /api/map (flows/serve/explorer_map.py's `packed`): the length of its
// head (4 bytes), the head (JSON: topics, venues, years, their colours, and where each
// column lies after it), then its columns, each read in place as a typed array (no object a
// paper). The answer is little-endian, as the machines browsers run on are.
export async function mapOf(version) {
  const buffer = await apiBytes("/api/map", { version });
  const size = new DataView(buffer).getUint32(0, true);
  const head = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, size)));
  const points = {};
  for (const { name, type, offset } of head.columns) {
    points[name] = new TYPES[type](buffer, 4 + size + offset, head.papers);
  }
  return { ...head, points };
}

// What the map colours by: the legend's entries (key, name, colour, papers) and each paper's
// entry (an index into them). A paper's topic, venue and year are indexes into the map's
// topics, venues and years (-1: none); venues past the coloured ones are "other venues".
function categories(mode) {
  const data = state.map;
  const none = data.no_value_colour;
  let rows, rest;
  if (mode === "venue") {
    const coloured = data.venues.filter((v) => v.colour !== none);
    rows = coloured.map((v, i) => ({ key: String(i), name: v.value, colour: v.colour, papers: v.papers }));
    rest = { key: "other", name: "other venues" };
  } else if (mode === "year") {
    rows = data.years.map((y) => ({ key: String(y.value), name: String(y.value), colour: y.colour, papers: y.papers }));
    rest = { key: "none", name: "no year" };
  } else {
    rows = data.topics.map((t) => ({ key: String(t.topic_id), name: t.name, title: t.label, colour: t.colour, papers: t.papers }));
    rest = { key: "none", name: "no topic" };
  }
  const column = data.points[mode];
  const category = new Uint16Array(column.length);
  let others = 0;
  for (let i = 0; i < column.length; i++) {
    const k = column[i];
    const other = k < 0 || k >= rows.length;
    if (other) others++;
    category[i] = other ? rows.length : k;
  }
  const items = others ? [...rows, { ...rest, colour: none, papers: others }] : rows;
  return { items, category };
}

function legendOf(mode) {
  if (!map.legends[mode]) map.legends[mode] = categories(mode);
  return map.legends[mode];
}

export function drawMap() {
  const data = state.map;
  map.layer = new PointLayer($("#map"), data.points);
  map.legends = {};
  map.papers = new Map();
  map.titles = new Map();
  map.indexes = new Map();
  const labels = $("#labels");
  labels.replaceChildren(...data.topics.filter((t) => t.x !== null).map((topic) => { // largest first: the first placed
    const text = document.createElementNS(SVG, "text");
    text.dataset.topic = topic.topic_id;
    return text;
  }));
  $("#map-caption").textContent = `${plural(data.papers, "paper")} · ${plural(data.topics.length, "topic")} · v${data.version}`;
  recolour();
  highlight(...map.highlighted);
}

// Colour the papers by map.colourBy, hide those whose legend entry is off, and redraw the
// legend.
export function recolour() {
  const { items, category } = legendOf(map.colourBy);
  const hidden = map.hidden[map.colourBy];
  map.layer.colour(category, items.map((item) => item.colour), items.map((item) => hidden.has(item.key)));
  drawLegend(items, hidden);
  applyView();
}

function drawLegend(items, hidden) {
  const entries = items.map((item) => el("li", {},
    el("button", {
      type: "button", class: "entry" + (hidden.has(item.key) ? " off" : ""), "data-key": item.key,
      "aria-pressed": String(!hidden.has(item.key)), title: (item.title || item.name) + " · click to show or hide",
    }, el("span", { class: "swatch", style: `background: ${item.colour}` }),
    el("span", { class: "name" }, item.name), el("span", { class: "count" }, item.papers))));
  const every = (off) => () => {
    hidden.clear();
    if (off) for (const item of items) hidden.add(item.key);
    recolour();
  };
  $("#legend").replaceChildren(
    el("div", { class: "legend-head" },
      el("span", {}, `${items.length} ${MODES[map.colourBy]}`),
      el("button", { type: "button", class: "linkish", onclick: every(false) }, "show all"),
      el("button", { type: "button", class: "linkish", onclick: every(true) }, "hide all")),
    el("ul", { class: "legend-entries " + map.colourBy }, entries));
}

function toggle(key) {
  const hidden = map.hidden[map.colourBy];
  if (hidden.has(key)) hidden.delete(key); else hidden.add(key);
  recolour();
}

// Draw the papers and place the labels in the current view.
export function applyView() {
  const layer = map.layer;
  if (!layer) return;
  layer.draw(map.view);
  const { s, ox, oy, w, h } = layer.layout(map.view);
  const off = map.colourBy === "topic" ? map.hidden.topic : new Set();
  placeLabels($("#labels").children, state.topics, (x, y) => [ox + x * s, oy - y * s], { w, h }, off);
}

let pending = null;
// Draw once before the next frame, however many moves of the pointer or wheel come first.
function redraw() {
  if (pending === null) pending = requestAnimationFrame(() => { pending = null; applyView(); });
}

function zoomAt(factor, px, py, now = false) {
  const view = map.view;
  const k = Math.min(40, Math.max(0.25, view.k * factor));
  const scale = k / view.k;
  view.tx = px - (px - view.tx) * scale;
  view.ty = py - (py - view.ty) * scale;
  view.k = k;
  if (now) applyView(); else redraw();
}

// The index on the map of each paper of `ids` (-1: not on it), asked for once a version.
async function indexesOf(ids) {
  const known = map.indexes; // this version's (drawMap starts anew)
  const wanted = [...new Set(ids)].filter((id) => !known.has(id));
  if (wanted.length) {
    const asked = { version: state.map.version, ids: wanted.join(",") };
    const found = await api("/api/map/indexes", asked).then((answer) => answer.indexes, () => null);
    if (found) for (const id of wanted) known.set(id, found[id] ?? -1);
  }
  return ids.map((id) => known.get(id) ?? -1);
}

// Mark the papers `ids` on the map and ring the paper `focus`, once their indexes are known
// (a highlight asked for since goes instead).
export async function highlight(ids, focus = null) {
  map.highlighted = [ids, focus];
  const asked = ++map.asked;
  if (!map.layer) return;
  const indexes = await indexesOf(focus === null ? ids : [...ids, focus]);
  if (asked !== map.asked) return;
  const at = focus === null ? -1 : indexes.pop();
  map.layer.highlight(indexes.filter((i) => i >= 0), at);
  $("#map").dataset.focus = at >= 0 ? focus : "";
  $("#map-view").classList.toggle("focused", ids.length > 0 || focus !== null);
  applyView();
}

// Where a paper lies on the page now (px from the viewport's corner), null where it is not
// on the map: what one clicks to open it.
export async function screenOf(paperId) {
  const [i] = map.layer ? await indexesOf([paperId]) : [-1];
  if (i < 0) return null;
  const [x, y] = map.layer.screenOf(i, map.view);
  const box = $("#map").getBoundingClientRect();
  return [box.left + x, box.top + y];
}

// A new version's map: every paper shown, the whole map in view.
export function resetMap() {
  for (const set of Object.values(map.hidden)) set.clear();
  map.view = { k: 1, tx: 0, ty: 0 };
}

// The paper at index i of the map (its id and title), asked for once a version.
function paperAt(i) {
  const known = map.papers; // this version's (drawMap starts anew)
  if (!known.has(i)) {
    known.set(i, api(`/api/map/paper/${i}`, { version: state.map.version }).catch((error) => {
      known.delete(i);
      throw error;
    }));
  }
  return known.get(i);
}

function tipText(i) {
  const { points, topics, venues, years } = state.map;
  const topic = topics[points.topic[i]]; // undefined for -1: none
  const where = [venues[points.venue[i]]?.value, years[points.year[i]]?.value].filter((v) => v !== undefined).join(" ");
  const title = map.titles.has(i) ? map.titles.get(i) : "…";
  return [title, el("small", {}, [topic ? topic.name : "no topic", where].filter(Boolean).join(" · "))];
}

// The tip over paper i, its title asked for once (shown when it comes, if i is still there).
function showTip(tip, i, event) {
  tip.dataset.index = i;
  tip.replaceChildren(...tipText(i));
  tip.style.left = `${event.clientX + 12}px`;
  tip.style.top = `${event.clientY + 12}px`;
  tip.hidden = false;
  if (map.titles.has(i)) return;
  const titles = map.titles;
  paperAt(i).then((paper) => {
    titles.set(i, paper.title);
    if (titles === map.titles && !tip.hidden && tip.dataset.index === String(i)) tip.replaceChildren(...tipText(i));
  }, () => {});
}

function pointer(canvas, tip) {
  let drag = null;
  const under = (event) => {
    const box = canvas.getBoundingClientRect();
    return map.layer ? map.layer.at(event.clientX - box.left, event.clientY - box.top, map.view) : -1;
  };
  canvas.addEventListener("wheel", (event) => {
    event.preventDefault();
    const box = canvas.getBoundingClientRect();
    zoomAt(event.deltaY < 0 ? 1.2 : 1 / 1.2, event.clientX - box.left, event.clientY - box.top);
  }, { passive: false });
  canvas.addEventListener("pointerdown", (event) => {
    drag = { x: event.clientX, y: event.clientY, tx: map.view.tx, ty: map.view.ty, moved: false };
  });
  window.addEventListener("pointermove", (event) => {
    if (!drag) return;
    const dx = event.clientX - drag.x;
    const dy = event.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; canvas.classList.add("dragging"); }
    if (!drag.moved) return;
    map.view.tx = drag.tx + dx;
    map.view.ty = drag.ty + dy;
    redraw();
  });
  window.addEventListener("pointerup", () => {
    canvas.classList.remove("dragging");
    setTimeout(() => { drag = null; }, 0);
  });
  canvas.addEventListener("click", (event) => {
    const i = under(event);
    if (i < 0 || (drag && drag.moved)) return;
    tip.hidden = true;
    const version = state.map.version;
    paperAt(i).then((paper) => {
      if (state.map.version === version) go(address(pathOf.paper(paper.paper_id)));
    }, (error) => showError(error.message));
  });
  canvas.addEventListener("mousemove", (event) => {
    if (drag && drag.moved) return;
    const i = under(event);
    canvas.classList.toggle("over", i >= 0);
    if (i < 0) tip.hidden = true; else showTip(tip, i, event);
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
}

export function setupMap() {
  pointer($("#map"), $("#tip"));
  $("#legend").addEventListener("click", (event) => {
    const entry = event.target.closest("button.entry");
    if (entry) toggle(entry.dataset.key);
  });
  $("#colour-by").addEventListener("change", (event) => {
    map.colourBy = event.target.value;
    recolour();
  });
  const centre = () => { const { w, h } = map.layer.layout({ k: 1, tx: 0, ty: 0 }); return [w / 2, h / 2]; };
  $("#zoom-in").addEventListener("click", () => zoomAt(1.5, ...centre(), true));
  $("#zoom-out").addEventListener("click", () => zoomAt(1 / 1.5, ...centre(), true));
  $("#zoom-reset").addEventListener("click", () => { map.view = { k: 1, tx: 0, ty: 0 }; applyView(); });
  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(applyView, 150);
  });
}
