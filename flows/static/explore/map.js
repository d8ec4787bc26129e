// The map of papers: a point per paper coloured by topic, venue or year, a legend whose
// entries show or hide their points, and topic labels placed where they neither overlap
// nor leave the panel. Colours and names come from /api/map (flows/core/palette.py).
"use strict";

import { $, address, el, go, pathOf, plural, state } from "./common.js";

const SVG = "http://www.w3.org/2000/svg";
const RADIUS = 4;
const GAP = 3; // px kept between two labels, and between a label and the panel's edge
const MODES = { topic: "topics", venue: "venues", year: "years" };

export const map = {
  colourBy: "topic",
  hidden: { topic: new Set(), venue: new Set(), year: new Set() }, // legend keys switched off
  view: { k: 1, tx: 0, ty: 0 }, // zoom and pan
  highlighted: [[], null],
  sizes: new Map(), // a label's text -> its box around its anchor, measured once
};

// What the map colours by now: the legend's entries (key, name, colour, papers) and each
// point's key.
function categories(mode) {
  const data = state.map;
  const none = data.no_value_colour;
  const points = data.points;
  const rest = (key, name, papers) => (papers ? [{ key, name, colour: none, papers }] : []);
  const nulls = (column) => column.filter((v) => v === null).length;
  if (mode === "venue") {
    const coloured = data.venues.filter((v) => v.colour !== none);
    const keyOf = (i) => (points.venue[i] !== null && points.venue[i] < coloured.length ? String(points.venue[i]) : "other");
    const others = points.venue.filter((v) => v === null || v >= coloured.length).length;
    const rows = coloured.map((v, i) => ({ key: String(i), name: v.value, colour: v.colour, papers: v.papers }));
    return { items: [...rows, ...rest("other", "other venues", others)], keyOf };
  }
  if (mode === "year") {
    const rows = data.years.map((y) => ({ key: String(y.value), name: String(y.value), colour: y.colour, papers: y.papers }));
    const keyOf = (i) => (points.year[i] === null ? "none" : String(points.year[i]));
    return { items: [...rows, ...rest("none", "no year", nulls(points.year))], keyOf };
  }
  const rows = data.topics.map((t) => ({ key: String(t.topic_id), name: t.name, title: t.label, colour: t.colour, papers: t.papers }));
  const keyOf = (i) => (points.topic_id[i] === null ? "none" : String(points.topic_id[i]));
  return { items: [...rows, ...rest("none", "no topic", nulls(points.topic_id))], keyOf };
}

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

export function drawMap() {
  const svg = $("#map");
  const data = state.map;
  const points = document.createElementNS(SVG, "g");
  points.id = "points";
  const n = data.points.paper_id.length;
  for (let i = 0; i < n; i++) {
    const circle = document.createElementNS(SVG, "circle");
    const [cx, cy] = toScreen(data.points.x[i], data.points.y[i]);
    circle.setAttribute("cx", cx.toFixed(2));
    circle.setAttribute("cy", cy.toFixed(2));
    circle.dataset.paper = data.points.paper_id[i];
    circle.dataset.index = i;
    points.append(circle);
  }
  const labels = document.createElementNS(SVG, "g");
  labels.id = "labels";
  for (const topic of data.topics) { // largest first: the first placed
    if (topic.x === null) continue;
    const text = document.createElementNS(SVG, "text");
    text.dataset.topic = topic.topic_id;
    labels.append(text);
  }
  svg.replaceChildren(points, labels);
  svg.dataset.points = n;
  $("#map-caption").textContent = `${plural(n, "paper")} · ${plural(data.topics.length, "topic")} · v${data.version}`;
  recolour();
  highlight(...map.highlighted);
}

// Colour the points by map.colourBy, hide those whose legend entry is off, and redraw the
// legend.
export function recolour() {
  const { items, keyOf } = categories(map.colourBy);
  const colour = new Map(items.map((item) => [item.key, item.colour]));
  const hidden = map.hidden[map.colourBy];
  for (const circle of $("#points").children) {
    const key = keyOf(Number(circle.dataset.index));
    circle.setAttribute("fill", colour.get(key));
    circle.classList.toggle("off", hidden.has(key));
  }
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

// Zoom scales the points' group; radii and labels are redrawn to keep their screen size.
export function applyView() {
  const { k, tx, ty } = map.view;
  const g = $("#points");
  if (!g) return;
  g.setAttribute("transform", `translate(${tx} ${ty}) scale(${k})`);
  const radius = (RADIUS / Math.sqrt(k)).toFixed(3);
  const focus = (7 / Math.sqrt(k)).toFixed(3);
  for (const circle of g.children) {
    circle.setAttribute("r", circle.classList.contains("focus") ? focus : radius);
    circle.style.strokeWidth = (0.6 / k).toFixed(3);
  }
  placeLabels();
}

// Each topic's label goes at the middle of its papers or, where that would cover a label
// already placed (larger topics go first) or leave the panel, a line or a label's width
// off it; failing that, as its shorter name; failing that, it is left out (the legend
// names every topic).
function placeLabels() {
  const { width, height } = mapSize();
  const { k, tx, ty } = map.view;
  const placed = [];
  const topicsOff = map.colourBy === "topic" ? map.hidden.topic : new Set();
  for (const text of $("#labels").children) {
    const topic = state.topics.get(Number(text.dataset.topic));
    text.setAttribute("display", "none");
    if (topicsOff.has(String(topic.topic_id))) continue;
    const [x, y] = toScreen(topic.x, topic.y);
    const spot = findSpot(text, [topic.name, topic.short], x * k + tx, y * k + ty, placed, width, height);
    if (!spot) continue;
    text.textContent = spot.words;
    text.setAttribute("x", spot.x.toFixed(1));
    text.setAttribute("y", spot.y.toFixed(1));
    text.removeAttribute("display");
    placed.push(spot.box);
  }
}

function findSpot(text, names, ax, ay, placed, width, height) {
  if (ax < 0 || ax > width || ay < 0 || ay > height) return null; // its topic is out of view
  for (const words of names) {
    if (!words) continue;
    const size = measure(text, words);
    const w = size.width + GAP;
    const h = size.height;
    for (const [ox, oy] of [[0, 0], [0, -h], [0, h], [w, 0], [-w, 0], [0, -2 * h], [0, 2 * h],
      [w, -h], [-w, -h], [w, h], [-w, h]]) {
      let x = ax + ox;
      let y = ay + oy;
      const left = x + size.x;
      const top = y + size.y;
      const dx = Math.min(Math.max(left, GAP), width - GAP - size.width) - left;
      const dy = Math.min(Math.max(top, GAP), height - GAP - size.height) - top;
      if (Math.abs(dx) > size.width / 2 || Math.abs(dy) > size.height) continue;
      x += dx;
      y += dy;
      const box = [x + size.x, y + size.y, x + size.x + size.width, y + size.y + size.height];
      if (!placed.some((other) => overlaps(box, other))) return { words, x, y, box };
    }
  }
  return null;
}

function overlaps(a, b) {
  return a[0] < b[2] + GAP && b[0] < a[2] + GAP && a[1] < b[3] + GAP && b[1] < a[3] + GAP;
}

// A label's box around its anchor (x, y: text-anchor middle, baseline central), measured
// in the page once for each text.
function measure(text, words) {
  if (!map.sizes.has(words)) {
    text.textContent = words;
    text.setAttribute("x", 0);
    text.setAttribute("y", 0);
    text.removeAttribute("display");
    const box = text.getBBox();
    map.sizes.set(words, { x: box.x, y: box.y, width: box.width, height: box.height });
    text.setAttribute("display", "none");
  }
  return map.sizes.get(words);
}

function zoomAt(factor, px, py) {
  const view = map.view;
  const k = Math.min(40, Math.max(0.25, view.k * factor));
  const scale = k / view.k;
  view.tx = px - (px - view.tx) * scale;
  view.ty = py - (py - view.ty) * scale;
  view.k = k;
  applyView();
}

export function highlight(ids, focus = null) {
  map.highlighted = [ids, focus];
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

// A new version's map: every point shown, the whole map in view.
export function resetMap() {
  for (const set of Object.values(map.hidden)) set.clear();
  map.view = { k: 1, tx: 0, ty: 0 };
}

function tipText(i) {
  const points = state.map.points;
  const topic = state.topics.get(points.topic_id[i]);
  const venue = points.venue[i] === null ? null : state.map.venues[points.venue[i]].value;
  const where = [venue, points.year[i]].filter((v) => v !== null).join(" ");
  return [points.title[i], el("small", {}, [topic ? topic.name : "no topic", where].filter(Boolean).join(" · "))];
}

export function setupMap() {
  const svg = $("#map");
  const tip = $("#tip");
  let drag = null;
  svg.addEventListener("wheel", (event) => {
    event.preventDefault();
    const box = svg.getBoundingClientRect();
    zoomAt(event.deltaY < 0 ? 1.2 : 1 / 1.2, event.clientX - box.left, event.clientY - box.top);
  }, { passive: false });
  svg.addEventListener("pointerdown", (event) => {
    drag = { x: event.clientX, y: event.clientY, tx: map.view.tx, ty: map.view.ty, moved: false };
  });
  window.addEventListener("pointermove", (event) => {
    if (!drag) return;
    const dx = event.clientX - drag.x;
    const dy = event.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; svg.classList.add("dragging"); }
    map.view.tx = drag.tx + dx;
    map.view.ty = drag.ty + dy;
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
    go(address(pathOf.paper(circle.dataset.paper)));
  });
  svg.addEventListener("mousemove", (event) => {
    const circle = event.target.closest("circle");
    if (!circle) { tip.hidden = true; return; }
    tip.replaceChildren(...tipText(Number(circle.dataset.index)));
    tip.style.left = `${event.clientX + 12}px`;
    tip.style.top = `${event.clientY + 12}px`;
    tip.hidden = false;
  });
  svg.addEventListener("mouseleave", () => { tip.hidden = true; });
  $("#legend").addEventListener("click", (event) => {
    const entry = event.target.closest("button.entry");
    if (entry) toggle(entry.dataset.key);
  });
  $("#colour-by").addEventListener("change", (event) => {
    map.colourBy = event.target.value;
    recolour();
  });
  const centre = () => { const { width, height } = mapSize(); return [width / 2, height / 2]; };
  $("#zoom-in").addEventListener("click", () => zoomAt(1.5, ...centre()));
  $("#zoom-out").addEventListener("click", () => zoomAt(1 / 1.5, ...centre()));
  $("#zoom-reset").addEventListener("click", () => { map.view = { k: 1, tx: 0, ty: 0 }; applyView(); });
  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => { if (state.map) drawMap(); }, 150);
  });
}
