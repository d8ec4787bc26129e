// The map's papers on one canvas: a dot per paper in its category's colour, written straight
// into the canvas's pixels (no element per paper: 100,000 dots draw in milliseconds), the
// highlighted papers drawn over them as rings, and a grid over the map that finds the paper
// under the pointer.
"use strict";

const CELLS = 256; // grid cells along each side of the map's square
const MARGIN = 18; // px between the map's square and the panel's edge
const BACKGROUND = "#fbfbfd"; // the panel's colour: what a dot's edge and a dimmed dot blend into
const DIM = 0.25; // a dot's strength where other papers are highlighted
const NEAR = 3; // px beyond a dot's edge that still points at it

// A dot's radius in px: 4 for a few thousand papers, smaller for more (never below 1, so a
// million papers still show), growing as one zooms in.
export function radius(n, k) {
  const base = Math.min(4, Math.max(1, 4 * Math.sqrt(2000 / Math.max(n, 1))));
  return Math.min(9, base * Math.sqrt(k));
}

const rgbs = new Map();
// A CSS colour (hex or hsl, as the palette gives it) as [r, g, b], read back from a pixel.
function rgbOf(colour) {
  if (!rgbs.has(colour)) {
    const ctx = document.createElement("canvas").getContext("2d", { willReadFrequently: true });
    ctx.fillStyle = colour;
    ctx.fillRect(0, 0, 1, 1);
    rgbs.set(colour, [...ctx.getImageData(0, 0, 1, 1).data.slice(0, 3)]);
  }
  return rgbs.get(colour);
}

// The pixels a disc of radius r covers around its centre pixel, each with its coverage
// (0-1): the edge is blended, so a dot is round at any size.
function discOf(r) {
  const reach = Math.ceil(r + 0.5);
  const dx = [], dy = [], cover = [];
  for (let y = -reach; y <= reach; y++) {
    for (let x = -reach; x <= reach; x++) {
      const c = Math.min(1, Math.max(0, r + 0.5 - Math.hypot(x, y)));
      if (c > 0) { dx.push(x); dy.push(y); cover.push(c); }
    }
  }
  return { dx, dy, cover };
}

// Each paper's grid cell, the papers of each cell listed together (cell c's are
// items[start[c]] up to items[start[c + 1]]): the papers near a place are found without
// looking at the others.
function gridOf(x, y) {
  const n = x.length;
  const cell = new Uint32Array(n);
  const start = new Uint32Array(CELLS * CELLS + 1);
  const at = (v) => Math.min(CELLS - 1, Math.max(0, Math.floor((v + 1) / 2 * CELLS)));
  for (let i = 0; i < n; i++) {
    cell[i] = at(y[i]) * CELLS + at(x[i]);
    start[cell[i] + 1]++;
  }
  for (let c = 0; c < CELLS * CELLS; c++) start[c + 1] += start[c];
  const filled = start.slice(0, -1);
  const items = new Uint32Array(n);
  for (let i = 0; i < n; i++) items[filled[cell[i]]++] = i;
  return { start, items, at };
}

export class PointLayer {
  // points: /api/map's columns (a paper at each index of the map, x and y in [-1, 1]).
  constructor(canvas, points) {
    this.canvas = canvas;
    this.n = points.x.length;
    this.x = points.x;
    this.y = points.y;
    this.grid = gridOf(this.x, this.y);
    this.category = new Uint16Array(this.n);
    this.colours = [];
    this.hidden = [];
    this.lit = [];
    this.isLit = new Uint8Array(this.n);
    this.focus = -1;
  }

  // Colour each paper by its category (an index into `colours`); hidden categories go.
  colour(category, colours, hidden) {
    this.category = category;
    this.colours = colours.map(rgbOf);
    this.hidden = hidden;
  }

  // Mark the papers at indexes `lit` and ring the one at `focus` (-1: none).
  highlight(lit, focus) {
    this.isLit.fill(0);
    this.lit = lit;
    for (const i of this.lit) this.isLit[i] = 1;
    this.focus = focus;
    if (this.focus >= 0) this.isLit[this.focus] = 1;
  }

  // Where the map's square lies on screen in `view` (zoom k, pan tx, ty): a paper at (x, y)
  // is drawn at (ox + x * s, oy - y * s), in px from the canvas's corner.
  layout(view) {
    const w = this.canvas.clientWidth || 600;
    const h = this.canvas.clientHeight || 500;
    const half = Math.max(10, Math.min(w, h) / 2 - MARGIN);
    return { w, h, s: half * view.k, ox: w / 2 * view.k + view.tx, oy: h / 2 * view.k + view.ty };
  }

  screenOf(i, view) {
    const { s, ox, oy } = this.layout(view);
    return [ox + this.x[i] * s, oy - this.y[i] * s];
  }

  // Draw every shown paper in `view`; the canvas then says what it drew (data-points,
  // data-shown, data-lit).
  draw(view) {
    const { w, h, s, ox, oy } = this.layout(view);
    const dpr = window.devicePixelRatio || 1;
    const width = Math.round(w * dpr), height = Math.round(h * dpr);
    if (this.canvas.width !== width || this.canvas.height !== height) {
      this.canvas.width = width;
      this.canvas.height = height;
    }
    const ctx = this.canvas.getContext("2d");
    const image = ctx.createImageData(width, height);
    const r = radius(this.n, view.k);
    const dimmed = this.lit.length > 0 || this.focus >= 0;
    const shown = this.paint(image, { s: s * dpr, ox: ox * dpr, oy: oy * dpr, r: r * dpr, dimmed });
    ctx.putImageData(image, 0, 0);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    let lit = 0;
    for (const i of [...this.lit, this.focus].filter((i) => i >= 0 && !this.hidden[this.category[i]])) {
      const focus = i === this.focus;
      ctx.beginPath();
      ctx.arc(ox + this.x[i] * s, oy - this.y[i] * s, focus ? Math.max(7, r + 3) : Math.max(3.5, r + 1), 0, 2 * Math.PI);
      ctx.fillStyle = `rgb(${this.colours[this.category[i]]})`;
      ctx.fill();
      ctx.lineWidth = focus ? 2.2 : 1;
      ctx.strokeStyle = focus ? "#000" : "#1d2330";
      ctx.stroke();
      if (!focus) lit++;
    }
    Object.assign(this.canvas.dataset, { points: this.n, shown, lit });
  }

  // Write the dots into the image's pixels (the highlighted ones are drawn after, over
  // them); how many papers are shown (not hidden), in view or not.
  paint(image, { s, ox, oy, r, dimmed }) {
    const { width, height } = image;
    const pixels = new Uint32Array(image.data.buffer); // one pixel a number: 0xAABBGGRR
    const bg = rgbOf(BACKGROUND);
    pixels.fill(pack(bg));
    const faded = this.colours.map((c) => (dimmed ? c.map((v, j) => bg[j] + (v - bg[j]) * DIM) : c));
    const halo = r >= 2.5 ? discOf(r + 0.8) : null; // a white edge sets large dots apart
    const disc = r >= 1.5 ? discOf(r) : null;
    const side = r >= 0.75 ? 2 : 1; // small dots: a square of pixels
    let shown = 0;
    for (let i = 0; i < this.n; i++) {
      const k = this.category[i];
      if (this.hidden[k]) continue;
      shown++;
      if (this.isLit[i]) continue;
      const cx = Math.round(ox + this.x[i] * s), cy = Math.round(oy - this.y[i] * s);
      if (cx < -10 || cy < -10 || cx > width + 10 || cy > height + 10) continue;
      if (halo) stamp(pixels, width, height, cx, cy, halo, [255, 255, 255]);
      if (disc) stamp(pixels, width, height, cx, cy, disc, faded[k]);
      else square(pixels, width, height, cx, cy, side, pack(faded[k]));
    }
    return shown;
  }

  // The paper under a point of the canvas (px from its corner), -1 for none: the focused
  // paper first, then a highlighted one, then the nearest.
  at(px, py, view) {
    const { s, ox, oy } = this.layout(view);
    const reach = Math.max(radius(this.n, view.k), 3.5) + NEAR;
    const { start, items, at } = this.grid;
    const mx = (px - ox) / s, my = (oy - py) / s, d = reach / s;
    let best = -1, bestRank = -1, bestDistance = Infinity;
    for (let cy = at(my - d); cy <= at(my + d); cy++) {
      for (let cx = at(mx - d); cx <= at(mx + d); cx++) {
        const c = cy * CELLS + cx;
        for (let j = start[c]; j < start[c + 1]; j++) {
          const i = items[j];
          if (this.hidden[this.category[i]]) continue;
          const distance = Math.hypot((this.x[i] - mx) * s, (this.y[i] - my) * s);
          if (distance > reach) continue;
          const rank = i === this.focus ? 2 : this.isLit[i];
          if (rank > bestRank || (rank === bestRank && distance < bestDistance)) {
            best = i; bestRank = rank; bestDistance = distance;
          }
        }
      }
    }
    return best;
  }
}

function pack([r, g, b]) {
  return (0xff000000 | (Math.round(b) << 16) | (Math.round(g) << 8) | Math.round(r)) >>> 0;
}

function square(pixels, width, height, cx, cy, side, colour) {
  for (let y = cy; y < cy + side; y++) {
    if (y < 0 || y >= height) continue;
    for (let x = cx; x < cx + side; x++) if (x >= 0 && x < width) pixels[y * width + x] = colour;
  }
}

// A disc's pixels in colour [r, g, b], each blended with what lies under it by its coverage.
function stamp(pixels, width, height, cx, cy, disc, [r, g, b]) {
  const { dx, dy, cover } = disc;
  for (let j = 0; j < dx.length; j++) {
    const x = cx + dx[j], y = cy + dy[j];
    if (x < 0 || y < 0 || x >= width || y >= height) continue;
    const p = y * width + x, a = cover[j], under = pixels[p];
    const r0 = under & 255, g0 = (under >> 8) & 255, b0 = (under >> 16) & 255;
    pixels[p] = (0xff000000 | ((b0 + (b - b0) * a) << 16) | ((g0 + (g - g0) * a) << 8) | (r0 + (r - r0) * a)) >>> 0;
  }
}
