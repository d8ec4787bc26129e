// Papers as the explorer lists them: a card each (authors linking to their pages, the
// query's words marked), and a list a page at a time, in the order a person picks.
"use strict";

import { address, el, go, link, pathOf, plural, topicChip } from "./common.js";

export const PAGE = 20;
const SORTS = {
  relevance: "best match first",
  year: "newest first",
  title: "title, A to Z",
  centre: "closest to its topic's centre",
};
// Words too common to mark in a snippet.
const COMMON = new Set(("a an and are as at be by for from has have in into is it its of on or " +
  "our that the their this to we with via using based towards toward new").split(" "));

// The query's words as one pattern: each word's stem (a plural or -ing, -ed ending dropped,
// as the keyword index's stemmer does) followed by any letters, matched from a word's start.
export function wordsPattern(query) {
  if (!query) return null;
  const stems = [];
  for (const word of query.toLowerCase().split(/[^\p{L}\p{N}]+/u)) {
    if (word.length < 2 || COMMON.has(word)) continue;
    const stem = word.length > 5 ? word.replace(/(ing|ed|es|s)$/u, "") : word.replace(/s$/u, "");
    stems.push(stem.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  }
  if (!stems.length) return null;
  stems.sort((a, b) => b.length - a.length);
  return new RegExp(`(?<![\\p{L}\\p{N}])(?:${stems.join("|")})[\\p{L}\\p{N}]*`, "giu");
}

// A text with the pattern's matches in <mark>.
export function marked(text, pattern) {
  if (!pattern || !text) return [text];
  const parts = [];
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) parts.push(text.slice(last, match.index));
    parts.push(el("mark", {}, match[0]));
    last = match.index + match[0].length;
  }
  if (last < text.length) parts.push(text.slice(last));
  return parts;
}

// The part of an abstract a card shows: from its start, or for an untitled paper (named by
// its abstract's first words) from where its name ends; where the query's first word is
// found late, from the sentence that holds it.
export function snippet(hit, pattern) {
  let text = hit.abstract || "";
  let cut = false;
  if (hit.untitled) {
    const named = hit.title.replace(/…$/, "");
    if (text.startsWith(named)) { text = text.slice(named.length).trim(); cut = true; }
  }
  if (pattern) {
    pattern.lastIndex = 0;
    const found = pattern.exec(text);
    pattern.lastIndex = 0;
    if (found && found.index > 160) {
      const before = text.slice(0, found.index);
      const sentence = Math.max(before.lastIndexOf(". "), before.lastIndexOf("? ")) + 2;
      const start = found.index - sentence < 200 ? sentence : before.lastIndexOf(" ", found.index - 60) + 1;
      text = text.slice(start);
      cut = true;
    }
  }
  return text ? (cut ? "…" : "") + text : "";
}

function authorLinks(hit, most = 6) {
  const names = hit.authors || [];
  if (!names.length) return null;
  const keys = hit.author_keys || [];
  const shown = names.slice(0, most).map((name, i) => (keys[i]
    ? link(address(pathOf.author(keys[i])), { class: "author" }, name) : name));
  const parts = shown.flatMap((node, i) => (i ? [", ", node] : [node]));
  if (names.length > most) parts.push(` and ${names.length - most} more`);
  return el("div", { class: "meta authors" }, parts);
}

// The cosine of query (or paper, or topic centre) and hit where there is one, else the
// keyword score.
function scoreView(hit, what) {
  if (typeof hit.score === "number") {
    const width = Math.max(0, Math.min(1, hit.score)) * 100;
    return el("span", { class: "score", title: what + (hit.bm25 ? `; bm25 ${hit.bm25}` : "") },
      el("span", { class: "gauge" }, el("i", { style: `width: ${width.toFixed(0)}%` })),
      `${hit.score.toFixed(2)}`);
  }
  if (typeof hit.bm25 === "number") return el("span", { class: "score", title: "keyword score (BM25)" }, `bm25 ${hit.bm25.toFixed(2)}`);
  return null;
}

export function card(hit, { pattern = null, extra = null, scoreTitle = "cosine similarity" } = {}) {
  const where = [
    hit.venue ? link(address(pathOf.venue(hit.venue)), { class: "venue" }, hit.venue) : null,
    hit.year ?? null,
  ].filter((v) => v !== null);
  const meta = el("div", { class: "meta" },
    where.length ? el("span", {}, where.flatMap((v, i) => (i ? [" ", v] : [v]))) : null,
    topicChip(hit.topic_id, hit.topic),
    hit.link ? el("a", { href: hit.link, target: "_blank", rel: "noopener" }, "paper ↗") : null,
    hit.code ? el("a", { href: hit.code, target: "_blank", rel: "noopener" }, "code ↗") : null,
    hit.good_match === false ? el("span", { class: "weak-tag", title: "not close to the query" }, "weak match") : null,
    extra,
    scoreView(hit, scoreTitle));
  const text = snippet(hit, pattern);
  return el("li", { class: "hit", "data-paper": hit.paper_id },
    link(address(pathOf.paper(hit.paper_id)),
      el("span", { class: "title" + (hit.untitled ? " untitled" : "") }, marked(hit.title, pattern))),
    authorLinks(hit),
    meta,
    text ? el("p", { class: "abstract" }, marked(text, pattern)) : null);
}

export function hitList(hits, extra = null) {
  return el("ol", { class: "hits" }, hits.map((hit) => card(hit, { extra: extra ? extra(hit) : null })));
}

// One page of a list (a /api/search or /api/papers answer) under a line saying which papers
// it shows, with the orders it can take, and links to the pages before and after. A list
// newest first is headed by each year with how many papers of the list it holds.
export function listing(data, { path, params, sorts, pattern = null, scoreTitle = undefined }) {
  const first = data.offset + 1;
  const last = data.offset + data.hits.length;
  const pages = Math.max(1, Math.ceil(data.total / data.k));
  const page = Math.floor(data.offset / data.k) + 1;
  const to = (changes) => address(path, { ...params, ...changes });
  const sort = el("select", { id: "sort", "aria-label": "Order" },
    sorts.map((key) => el("option", { value: key, selected: key === data.sort }, SORTS[key])));
  sort.addEventListener("change", () => go(to({ sort: sort.value, page: null })));
  const items = [];
  let year;
  for (const hit of data.hits) {
    if (data.sort === "year" && data.year_papers && hit.year !== year) {
      year = hit.year;
      const n = data.year_papers[String(year)];
      items.push(el("li", { class: "year-head", "data-year": year ?? "" },
        year ?? "no year", n ? el("span", { class: "muted" }, ` · ${plural(n, "paper")}`) : null));
    }
    items.push(card(hit, { pattern, scoreTitle }));
  }
  const pager = pages > 1 ? el("nav", { class: "pager", "aria-label": "Pages" },
    page > 1 ? link(to({ page: page - 1 === 1 ? null : page - 1 }), { rel: "prev" }, "‹ Previous") : el("span", { class: "muted" }, "‹ Previous"),
    el("span", { class: "page-of" }, `page ${page} of ${pages}`),
    page < pages ? link(to({ page: page + 1 }), { rel: "next" }, "Next ›") : el("span", { class: "muted" }, "Next ›")) : null;
  return el("section", { class: "listing" },
    el("div", { class: "list-head" },
      el("span", { class: "shown" }, data.total
        ? `${first.toLocaleString("en")}–${last.toLocaleString("en")} of ${data.query
          ? `the ${plural(data.total, "best match", "best matches")}` : plural(data.total, "paper")}`
        : "No papers"),
      sorts.length > 1 ? el("label", { class: "sort" }, "order ", sort) : null),
    el("ol", { class: "hits" }, items),
    pager);
}
