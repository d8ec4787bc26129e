// The map of papers: a dot per paper coloured by topic, venue or year, drawn on one canvas
// (points.js), a legend whose entries show or hide their papers, and topic labels placed
// where they neither overlap nor leave the panel (labels.js). Colours and names come from
// /api/map (flows/core/palette.py); a paper's title, when one points at it, from /api/name.
"use strict";

import { $, address, api, el, go, pathOf, plural, state } from "./common.js";
import { placeLabels } from "./labels.js";
import { PointLayer } from "./points.js";

const SVG = "http://www.w3.org/2000/svg";
const MODES = { topic: "topics", venue: "venues", year: "years" };

export const map = {
  colourBy: "topic",
  hidden: { topic: new Set(), venue: new Set(), year: new Set() }, // legend keys switched off
  view: { k: 1, tx: 0, ty: 0 }, // zoom and pan
  highlighted: [[], null],
  layer: null, // the PointLayer of state.map
  legends: {}, // colour-by -> its legend entries and each paper's entry, made once a version
  titles: new Map(), // paper_id -> its title, as /api/name gave it
};

// What the map colours by: the legend's entries (key, name, colour, papers) and each paper's
// entry (an index into them).
function categories(mode) {
  const data = state.map;
  const none = data.no_value_colour;
  const points = data.points;
  const n = points.paper_id.length;
  const category = new Uint16Array(n);
  let rows, rest, of;
  if (mode === "venue") {
    const coloured = data.venues.filter((v) => v.colour !== none);
    rows = coloured.map((v, i) => ({ key: String(i), name: v.value, colour: v.colour, papers: v.papers }));
    rest = { key: "other", name: "other venues" };
    of = (i) => (points.venue[i] !== null && points.venue[i] < coloured.length ? points.venue[i] : -1);
  } else if (mode === "year") {
    rows = data.years.map((y) => ({ key: String(y.value), name: String(y.value), colour: y.colour, papers: y.papers }));
    const index = new Map(data.years.map((y, i) => [y.value, i]));
    rest = { key: "none", name: "no year" };
    of = (i) => (points.year[i] === null ? -1 : index.get(points.year[i]));
  } else {
    rows = data.topics.map((t) => ({ key: String(t.topic_id), name: t.name, title: t.label, colour: t.colour, papers: t.papers }));
    const index = new Map(data.topics.map((t, i) => [t.topic_id, i]));
    rest = { key: "none", name: "no topic" };
    of = (i) => (points.topic_id[i] === null ? -1 : index.get(points.topic_id[i]));
  }
  let others = 0;
  for (let i = 0; i < n; i++) {
    const k = of(i);
    if (k === -1) others++;
    category[i] = k === -1 ? rows.length : k;
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
  map.titles.clear();
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

export function highlight(ids, focus = null) {
  map.highlighted = [ids, focus];
  if (!map.layer) return;
  map.layer.highlight(ids, focus);
  $("#map-view").classList.toggle("focused", ids.length > 0 || focus !== null);
  applyView();
}

// Where a paper lies on the page now (px from the viewport's corner), null where it is not
// on the map: what one clicks to open it.
export function screenOf(paperId) {
  const i = map.layer ? map.layer.indexOf(paperId) : -1;
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

function tipText(i) {
  const points = state.map.points;
  const id = points.paper_id[i];
  const topic = state.topics.get(points.topic_id[i]);
  const venue = points.venue[i] === null ? null : state.map.venues[points.venue[i]].value;
  const where = [venue, points.year[i]].filter((v) => v !== null).join(" ");
  const title = map.titles.has(id) ? map.titles.get(id) : "…";
  return [title, el("small", {}, [topic ? topic.name : "no topic", where].filter(Boolean).join(" · "))];
}

// The tip over paper i, its title asked for once (shown when it comes, if i is still there).
function showTip(tip, i, event) {
  const id = state.map.points.paper_id[i];
  tip.dataset.paper = id;
  tip.replaceChildren(...tipText(i));
  tip.style.left = `${event.clientX + 12}px`;
  tip.style.top = `${event.clientY + 12}px`;
  tip.hidden = false;
  if (map.titles.has(id)) return;
  api("/api/name/" + encodeURIComponent(id), { version: state.version }).then((named) => {
    map.titles.set(id, named.title);
    if (!tip.hidden && tip.dataset.paper === id) tip.replaceChildren(...tipText(i));
  }, () => map.titles.set(id, id));
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
    go(address(pathOf.paper(state.map.points.paper_id[i])));
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
