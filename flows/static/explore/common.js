// What every part of the explorer's page shares: the state, DOM helpers, the API and the
// addresses of its pages.
"use strict";

export const $ = (selector) => document.querySelector(selector);

export const state = {
  version: null, // the version every request reads
  defaultVersion: Number(document.body.dataset.defaultVersion),
  map: null, // the /api/map answer of state.version (its head: topics, venues, years; its points)
  topics: new Map(), // topic_id -> its /api/map entry (name, label, colour, ...)
};

export function el(tag, attrs = {}, ...children) {
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
export function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

export function showError(message) {
  const box = $("#error");
  box.textContent = message || "";
  box.hidden = !message;
}

function apiUrl(path, params) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") url.searchParams.set(key, value);
  }
  return url;
}

export async function api(path, params = {}) {
  const response = await fetch(apiUrl(path, params));
  const body = await response.json().catch(() => ({ error: `${response.status} ${response.statusText}` }));
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

// A binary answer of the API (/api/map) as an ArrayBuffer; an error is answered in JSON.
export async function apiBytes(path, params = {}) {
  const response = await fetch(apiUrl(path, params));
  if (response.ok) return response.arrayBuffer();
  const body = await response.json().catch(() => ({}));
  throw new Error(body.error || `${response.status} ${response.statusText}`);
}

// Addresses: /?q=&venue=&year=&topic=&mode=&sort=&page=&v=N, /paper/<id>, /topic/<id>,
// /author/<key>, /venue/<name> (each with ?v=N for a version other than the default).
export function address(path, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") query.set(key, value);
  }
  if (state.version !== state.defaultVersion) query.set("v", state.version);
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

export const pathOf = {
  paper: (id) => "/paper/" + encodeURIComponent(id),
  topic: (id) => "/topic/" + encodeURIComponent(id),
  author: (key) => "/author/" + encodeURIComponent(key),
  venue: (name) => "/venue/" + encodeURIComponent(name),
};

export function go(url) {
  history.pushState(null, "", url);
  window.dispatchEvent(new Event("explorer:navigate"));
}

// A link the page follows itself (no reload); a plain object first gives more attributes.
export function link(url, ...children) {
  const attrs = children.length && children[0]?.constructor === Object ? children.shift() : {};
  return el("a", { ...attrs, href: url, "data-nav": true }, ...children);
}

// A topic's name on a chip in its colour, linking to its page.
export function topicChip(topicId, label = null) {
  if (topicId === null || topicId === undefined) return null;
  const topic = state.topics.get(topicId);
  const name = topic ? topic.name : label || `topic ${topicId}`;
  return link(address(pathOf.topic(topicId)), el("span", {
    class: "chip", style: `--dot: ${topic ? topic.colour : state.map.no_value_colour}`,
    title: "Topic: " + (topic ? topic.label : label || ""),
  }, name));
}

export function plural(n, one, many = one + "s") {
  return `${n.toLocaleString("en")} ${n === 1 ? one : many}`;
}
