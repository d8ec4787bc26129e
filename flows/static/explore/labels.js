// The map's topic labels: larger topics first, each at the middle of its papers or, where
// that would cover a label already placed or leave the panel, a line or a label's width off
// it; failing that, as its shorter name; failing that, it is left out (the legend names
// every topic). A label also needs room around it, so as many go on the map as it can hold
// and still show its papers: zooming in spreads the topics apart and names more of them.
"use strict";

const GAP = 3; // px kept between two labels, and between a label and the panel's edge
const ROOM = 20000; // px² of map a label needs to itself: a panel of 600 x 540 names 16 topics
const sizes = new Map(); // a label's text -> its box around its anchor, measured once

// Place the labels (svg text elements, one a topic, data-topic its id) of `topics` (by id)
// on a panel w x h px, a topic's middle (x, y) drawn at place(x, y); topics of `off` go.
export function placeLabels(texts, topics, place, { w, h }, off) {
  const placed = [];
  const most = Math.max(1, Math.floor(w * h / ROOM));
  for (const text of texts) {
    const topic = topics.get(Number(text.dataset.topic));
    text.setAttribute("display", "none");
    if (placed.length >= most || off.has(String(topic.topic_id))) continue;
    const [x, y] = place(topic.x, topic.y);
    const spot = findSpot(text, [topic.name, topic.short], x, y, placed, w, h);
    if (!spot) continue;
    text.textContent = spot.words;
    text.setAttribute("x", spot.x.toFixed(1));
    text.setAttribute("y", spot.y.toFixed(1));
    text.removeAttribute("display");
    placed.push(spot.box);
  }
  return placed.length;
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
  if (!sizes.has(words)) {
    text.textContent = words;
    text.setAttribute("x", 0);
    text.setAttribute("y", 0);
    text.removeAttribute("display");
    const box = text.getBBox();
    sizes.set(words, { x: box.x, y: box.y, width: box.width, height: box.height });
    text.setAttribute("display", "none");
  }
  return sizes.get(words);
}
